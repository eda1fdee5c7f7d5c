package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads a cluster YAML over the defaults.
func Load(path string) (Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Default(), err
	}
	return Parse(path, b)
}

// flatKeys are the top-level keys of the flat form.
var flatKeys = []string{"model", "gpu", "tp", "weight_dtype", "kv_dtype", "replicas", "engine", "latency"}

var lineRE = regexp.MustCompile(`line ([0-9]+): `)

// Parse reads a cluster YAML (name is used in messages) over the defaults.
// Unknown keys, values of the wrong type and invalid values are errors
// naming the file, line and key, with the valid keys listed.
func Parse(name string, b []byte) (Cluster, error) {
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
	c.lines = map[string]int{}
	w := walker{name: name, lines: c.lines}
	w.walk(root, reflect.TypeOf(Cluster{}), "")
	if w.err != nil {
		return c, w.err
	}
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
	if err := c.Validate(); err != nil {
		return c, err
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

// walker checks a YAML tree against the Go types it decodes into: unknown
// keys (with a "did you mean"), and scalars of the wrong kind, named by
// file, line and key path. It records each key's line.
type walker struct {
	name  string
	lines map[string]int
	err   error
}

var durationType = reflect.TypeOf(Duration(0))

func (w *walker) fail(line int, path, format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%s:%d: %s: %s", w.name, line, path, fmt.Sprintf(format, args...))
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if w.err != nil {
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	if t == durationType {
		if n.Kind != yaml.ScalarNode {
			w.fail(n.Line, path, "expected a duration such as 90s, 10m or 1h (or seconds), found a %s", kindName(n))
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.walk(n, t.Elem(), path)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.fail(n.Line, path, "expected a mapping of keys (%s), found %s", strings.Join(structKeys(t), ", "), describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fieldByTag(t, k.Value)
			p := join(path, k.Value)
			if !ok {
				keys := structKeys(t)
				msg := fmt.Sprintf("unknown key (expected one of %s)", strings.Join(keys, ", "))
				if s := Suggest(k.Value, keys); s != "" {
					msg = fmt.Sprintf("unknown key; did you mean %s? (expected one of %s)", s, strings.Join(keys, ", "))
				}
				w.fail(k.Line, p, "%s", msg)
				return
			}
			w.lines[p] = k.Line
			w.walk(v, f.Type, p)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.fail(n.Line, path, "expected a list, found %s", describe(n))
			return
		}
		for i, e := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.lines[p] = e.Line
			w.walk(e, t.Elem(), p)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.fail(n.Line, path, "expected a mapping, found %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			w.lines[p] = n.Content[i].Line
			w.walk(n.Content[i+1], t.Elem(), p)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.fail(n.Line, path, "expected a string, found %s", describe(n))
		}
	case reflect.Bool:
		if _, err := strconv.ParseBool(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected true or false, found %s", describe(n))
		}
	case reflect.Int, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(n.Value, 0, 64); n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected an integer, found %s", describe(n))
		}
	case reflect.Uint64:
		if _, err := strconv.ParseUint(n.Value, 0, 64); n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected a non-negative integer, found %s", describe(n))
		}
	case reflect.Float64:
		if _, err := strconv.ParseFloat(n.Value, 64); n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected a number, found %s", describe(n))
		}
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return "a " + kindName(n)
}

func tagName(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	if i := strings.IndexByte(tag, ','); i >= 0 {
		tag = tag[:i]
	}
	return tag
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && tagName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func structKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if n := tagName(f); f.IsExported() && n != "" && n != "-" {
			out = append(out, n)
		}
	}
	return out
}

// Suggest returns the option closest to word when it is close enough to be
// a likely typo ("" otherwise): edit distance at most a third of the
// word's length (at least 1), ties to the first option.
func Suggest(word string, options []string) string {
	best, bd := "", 1<<30
	for _, o := range options {
		if d := editDistance(strings.ToLower(word), strings.ToLower(o)); d < bd {
			best, bd = o, d
		}
	}
	if bd <= max(1, len(word)/3) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flatOut and deploymentsOut are the printed shapes of the two forms.
type flatOut struct {
	Model            string   `yaml:"model"`
	GPU              string   `yaml:"gpu"`
	TP               int      `yaml:"tp"`
	WeightDtype      string   `yaml:"weight_dtype"`
	KVDtype          string   `yaml:"kv_dtype"`
	Replicas         int      `yaml:"replicas"`
	Seed             uint64   `yaml:"seed"`
	Horizon          Duration `yaml:"horizon"`
	SnapshotInterval Duration `yaml:"snapshot_interval"`
	ClientTimeout    Duration `yaml:"client_timeout"`
	Engine           Engine   `yaml:"engine"`
	Router           Router   `yaml:"router"`
	Latency          Latency  `yaml:"latency"`
}

type deploymentsOut struct {
	Deployments      []Deployment `yaml:"deployments"`
	Seed             uint64       `yaml:"seed"`
	Horizon          Duration     `yaml:"horizon"`
	SnapshotInterval Duration     `yaml:"snapshot_interval"`
	ClientTimeout    Duration     `yaml:"client_timeout"`
	Router           Router       `yaml:"router"`
}

// YAML renders the effective config (for --print-config); it parses back
// to the same config.
func (c Cluster) YAML() string {
	var v any
	if c.IsFlat() {
		v = flatOut{c.Model, c.GPU, c.TP, c.WeightDtype, c.KVDtype, c.Replicas, c.Seed, c.Horizon, c.SnapshotInterval,
			c.ClientTimeout, c.Engine, c.Router, c.Latency}
	} else {
		v = deploymentsOut{c.Deployments, c.Seed, c.Horizon, c.SnapshotInterval, c.ClientTimeout, c.Router}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(v) // plain structs: cannot fail
	return buf.String()
}
