package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"

	"github.com/blis-sim/blis/lib/yamlcheck"
	"go.yaml.in/yaml/v3"
)

// Load reads and validates a cluster YAML over the defaults.
func Load(path string) (Cluster, error) {
	c, err := Read(path)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Read reads a cluster YAML over the defaults without validating its
// values (Decode), for a caller that changes them (flags over the file)
// and then validates once.
func Read(path string) (Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Default(), err
	}
	return Decode(path, b)
}

// flatKeys are the top-level keys of the flat form.
var flatKeys = []string{"model", "gpu", "tp", "parallel", "speculative", "lora", "weight_dtype", "kv_dtype", "replicas", "engine", "latency"}

var lineRE = regexp.MustCompile(`line ([0-9]+): `)

// Parse reads a cluster YAML (name is used in messages) over the defaults.
// Unknown keys, values of the wrong type and invalid values are errors
// naming the file, line and key, with the valid keys listed.
func Parse(name string, b []byte) (Cluster, error) {
	c, err := Decode(name, b)
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Decode is Parse without the validation of values: the keys and their
// types are checked, the values are left for Validate.
func Decode(name string, b []byte) (Cluster, error) {
	c := Default()
	c.Name = name
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return c, fmt.Errorf("%s: %s", name, strings.TrimPrefix(lineRE.ReplaceAllString(err.Error(), "$1: "), "yaml: "))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c, nil // empty file: the defaults
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return c, nil
	}
	lines, err := yamlcheck.Check(name, root, reflect.TypeOf(Cluster{}))
	if err != nil {
		return c, err
	}
	c.lines = lines
	if err := checkForms(name, root); err != nil {
		return c, err
	}
	if err := root.Decode(&c); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
		msg = strings.TrimSpace(lineRE.ReplaceAllString(msg, name+":$1: "))
		if !strings.HasPrefix(msg, name) {
			msg = name + ": " + msg
		}
		return c, errors.New(msg)
	}
	return c, nil
}

// checkForms refuses a file that mixes the flat keys with deployments.
func checkForms(name string, root *yaml.Node) error {
	if root.Kind != yaml.MappingNode {
		return nil
	}
	depLine := 0
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "deployments" {
			depLine = root.Content[i].Line
		}
	}
	if depLine == 0 {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		for _, f := range flatKeys {
			if k.Value == f {
				return fmt.Errorf("%s:%d: %s: a top-level %s cannot be combined with deployments: (line %d); move it into each deployment", name, k.Line, f, f, depLine)
			}
		}
	}
	return nil
}

// Suggest returns the option closest to word when it is close enough to be
// a likely typo ("" otherwise); see yamlcheck.Suggest.
func Suggest(word string, options []string) string { return yamlcheck.Suggest(word, options) }

// flatOut and deploymentsOut are the printed shapes of the two forms.
type flatOut struct {
	Model            string       `yaml:"model"`
	GPU              string       `yaml:"gpu"`
	TP               int          `yaml:"tp"`
	WeightDtype      string       `yaml:"weight_dtype"`
	KVDtype          string       `yaml:"kv_dtype"`
	Replicas         int          `yaml:"replicas"`
	Seed             uint64       `yaml:"seed"`
	Horizon          Duration     `yaml:"horizon"`
	SnapshotInterval Duration     `yaml:"snapshot_interval"`
	KVEventDelay     Duration     `yaml:"kv_event_delay"`
	ClientTimeout    Duration     `yaml:"client_timeout"`
	Engine           Engine       `yaml:"engine"`
	Router           Router       `yaml:"router"`
	Latency          Latency      `yaml:"latency"`
	Network          Network      `yaml:"network,omitempty"`
	Parallel         *Parallel    `yaml:"parallel,omitempty"`
	Speculative      *Speculative `yaml:"speculative,omitempty"`
	LoRA             *LoRA        `yaml:"lora,omitempty"`
}

type deploymentsOut struct {
	Deployments      []Deployment `yaml:"deployments"`
	Seed             uint64       `yaml:"seed"`
	Horizon          Duration     `yaml:"horizon"`
	SnapshotInterval Duration     `yaml:"snapshot_interval"`
	KVEventDelay     Duration     `yaml:"kv_event_delay"`
	ClientTimeout    Duration     `yaml:"client_timeout"`
	Router           Router       `yaml:"router"`
	Network          Network      `yaml:"network,omitempty"`
}

// YAML renders the effective config (for --print-config); it parses back
// to the same config.
func (c Cluster) YAML() string {
	var v any
	if c.IsFlat() {
		v = flatOut{c.Model, c.GPU, c.TP, c.WeightDtype, c.KVDtype, c.Replicas, c.Seed, c.Horizon, c.SnapshotInterval,
			c.KVEventDelay, c.ClientTimeout, c.Engine, c.Router, c.Latency, c.Network, c.Parallel, c.Speculative, c.LoRA}
	} else {
		v = deploymentsOut{c.Deployments, c.Seed, c.Horizon, c.SnapshotInterval, c.KVEventDelay, c.ClientTimeout, c.Router, c.Network}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(v) // plain structs: cannot fail
	return buf.String()
}
