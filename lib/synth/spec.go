// Package synth turns a workload spec (YAML) into a requests table: clients
// with arrival processes and load profiles, multi-turn conversations, shared
// system prompts, misbehaving tenants and agentic workflows whose steps
// become rows linked by depends_on. docs/workload.md is the user reference.
package synth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/lib/yamlcheck"
	"go.yaml.in/yaml/v3"
)

// Spec is a decoded workload spec. Fields mirror the YAML keys.
type Spec struct {
	Version         int              `yaml:"version"`
	Seed            uint64           `yaml:"seed"`
	Horizon         Duration         `yaml:"horizon"`
	NumRequests     int64            `yaml:"num_requests"`
	AggregateRate   float64          `yaml:"aggregate_rate"`
	Mode            string           `yaml:"mode"`
	Concurrency     int              `yaml:"concurrency"`
	MaxInFlight     int              `yaml:"max_in_flight"`
	ThinkTime       *Dist            `yaml:"think_time"`
	PrefixBlockSize int              `yaml:"prefix_block_size"`
	PrefixGroups    []PrefixGroup    `yaml:"prefix_groups"`
	Tools           map[string]*Tool `yaml:"tools"`
	Clients         []*Client        `yaml:"clients"`
	Description     string           `yaml:"description"`

	file string     // spec path for messages ("" for bytes)
	dir  string     // base for relative paths
	root *yaml.Node // for line numbers in validation messages
	// Inputs lists files the spec read (empirical columns, replayed traces).
	Inputs []string `yaml:"-"`
}

// Run modes.
const (
	ModeRate        = "rate"        // roots arrive by each client's arrival process
	ModeOffline     = "offline"     // every root at t=0
	ModeConcurrency = "concurrency" // closed loop of N virtual users
)

// PrefixGroup is a shared system prompt.
type PrefixGroup struct {
	Name   string  `yaml:"name"`
	Length int     `yaml:"length"`
	Weight float64 `yaml:"weight"`
}

// Tool is an entry of the tools table.
type Tool struct {
	Latency      *Dist `yaml:"latency"`       // seconds
	OutputTokens *Dist `yaml:"output_tokens"` // tokens fed to the next llm step
}

// Client is one client profile.
type Client struct {
	Name         string        `yaml:"name"`
	Weight       *float64      `yaml:"weight"`
	RateFraction *float64      `yaml:"rate_fraction"`
	TenantID     string        `yaml:"tenant_id"`
	SLOClass     string        `yaml:"slo_class"`
	Priority     *Dist         `yaml:"priority"` // an integer, or a distribution drawn per session
	Model        string        `yaml:"model"`
	Timeout      Duration      `yaml:"timeout"` // the client gives up on a request not finished this long after it arrives (0 = never)
	Streaming    *float64      `yaml:"streaming"`
	Input        *Dist         `yaml:"input"`
	Output       *Dist         `yaml:"output"`
	Arrival      *Arrival      `yaml:"arrival"`
	LoadProfile  *Profile      `yaml:"load_profile"`
	Prefix       *PrefixUse    `yaml:"prefix"`
	Behaviour    *Behaviour    `yaml:"behaviour"`
	Conversation *Conversation `yaml:"conversation"`
	Agentic      *Agentic      `yaml:"agentic"`

	// Issue 19: request types, correlations, archetypes, session details.
	RequestType               string       `yaml:"request_type"` // overrides the derived type
	Reasoning                 *Reasoning   `yaml:"reasoning"`
	Multimodal                *Multimodal  `yaml:"multimodal"`
	Correlation               *Correlation `yaml:"correlation"`
	Archetype                 *Archetype   `yaml:"archetype"`
	ConversationalProbability *float64     `yaml:"conversational_probability"`
	// LoRA assigns sessions LoRA adapters (lora.go); nil: the base model.
	LoRA *LoRAUse `yaml:"lora"`

	replay []int64 // replayed arrival times, µs from the first
	plan   *plan
	prio   int32 // constant priority (Priority nil or constant)
}

// Arrival is a client's arrival process.
type Arrival struct {
	Process string   `yaml:"process"` // poisson, gamma, weibull, constant, replay
	CV      *float64 `yaml:"cv"`
	Jitter  float64  `yaml:"jitter"`
	Path    string   `yaml:"path"`
	Column  string   `yaml:"column"`
	Unit    string   `yaml:"unit"` // numeric timestamps: s (default), ms, us
	Speedup float64  `yaml:"speedup"`
	// synchronized: bursts at offset + k·period on a clock shared by every client.
	Period    Duration `yaml:"period"`
	Offset    Duration `yaml:"offset"`
	BurstSize *Dist    `yaml:"burst_size"`
	Spread    Duration `yaml:"spread"`
}

// Profile multiplies a client's base rate over time.
type Profile struct {
	Type       string        `yaml:"type"` // step, ramp, diurnal, spike
	Steps      []ProfileStep `yaml:"steps"`
	From       *float64      `yaml:"from"`
	To         *float64      `yaml:"to"`
	Start      Duration      `yaml:"start"`
	End        Duration      `yaml:"end"`
	Period     Duration      `yaml:"period"`
	Min        *float64      `yaml:"min"`
	Max        *float64      `yaml:"max"`
	PeakAt     Duration      `yaml:"peak_at"`
	At         Duration      `yaml:"at"`
	Duration   Duration      `yaml:"duration"`
	Multiplier *float64      `yaml:"multiplier"`
}

// ProfileStep is one level of a step profile, from At on.
type ProfileStep struct {
	At         Duration `yaml:"at"`
	Multiplier float64  `yaml:"multiplier"`
}

// PrefixUse selects which prefix groups a client's sessions start with.
type PrefixUse struct {
	Groups           []string `yaml:"groups"`
	ReuseProbability *float64 `yaml:"reuse_probability"`
}

// Behaviour is a tenant's behaviour: normal, bursty or abusive.
type Behaviour struct {
	Type                string   `yaml:"type"`
	BurstProbability    float64  `yaml:"burst_probability"`
	BurstSize           *Dist    `yaml:"burst_size"`
	BurstInterval       Duration `yaml:"burst_interval"`
	RateMultiplier      float64  `yaml:"rate_multiplier"`
	OversizeProbability float64  `yaml:"oversize_probability"`
	OversizeFactor      float64  `yaml:"oversize_factor"`
	// adversarial: an attack inside [start, start+duration).
	Attack    string   `yaml:"attack"` // long_prompt_flood or kv_exhaustion
	Start     Duration `yaml:"start"`
	Duration  Duration `yaml:"duration"` // 0 = until the end
	Input     *Dist    `yaml:"input"`
	Output    *Dist    `yaml:"output"`
	Turns     *Dist    `yaml:"turns"`
	ThinkTime *Dist    `yaml:"think_time"`
	// synchronized_burst: burst_size sessions every period (at offset + k·period,
	// within spread) on a clock shared by every client, on top of the base process.
	Period Duration `yaml:"period"`
	Offset Duration `yaml:"offset"`
	Spread Duration `yaml:"spread"`

	attackConv  *Conversation // kv_exhaustion's sessions
	syncArrival *Arrival      // synchronized_burst's clock
}

// UnmarshalYAML accepts `behaviour: bursty` as well as a mapping. The
// function form keeps the decoder's KnownFields setting.
func (b *Behaviour) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		*b = Behaviour{Type: s}
		return nil
	}
	type plain Behaviour
	return unmarshal((*plain)(b))
}

// Conversation makes a client's sessions multi-turn.
type Conversation struct {
	Turns         *Dist  `yaml:"turns"`
	ThinkTime     *Dist  `yaml:"think_time"` // seconds
	ContextGrowth string `yaml:"context_growth"`
}

// Agentic is a client's workflow: steps composed into a DAG with an optional loop.
type Agentic struct {
	Steps []*Step `yaml:"steps"`
	Loop  *Loop   `yaml:"loop"`
}

// Step is one node of an agentic workflow.
type Step struct {
	ID            string   `yaml:"id"`
	Type          string   `yaml:"type"` // llm_call or tool_call
	Tool          string   `yaml:"tool"`
	Input         *Dist    `yaml:"input"`
	Output        *Dist    `yaml:"output"`
	DependsOn     []string `yaml:"depends_on"`
	FanOut        *int     `yaml:"fan_out"`
	ContextGrowth string   `yaml:"context_growth"`
}

// Loop repeats a connected group of steps.
type Loop struct {
	Over          []string `yaml:"over"`
	MaxIterations int      `yaml:"max_iterations"`
	Iterations    *Dist    `yaml:"iterations"`
}

// Duration is a time in µs, written as "250ms", "1.5s", "2h" or a number of seconds.
type Duration int64

// YAMLScalar describes a Duration for yamlcheck's messages.
func (*Duration) YAMLScalar() string { return "a duration such as 30s or 250ms (or seconds)" }

// UnmarshalYAML parses a Go duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a duration such as 30s or 250ms", n.Line)
	}
	if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e12 {
			return fmt.Errorf("line %d: expected a duration, found %v", n.Line, n.Value)
		}
		*d = Duration(math.Round(f * 1e6))
		return nil
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return fmt.Errorf("line %d: expected a duration such as 30s or 250ms, found %q", n.Line, n.Value)
	}
	*d = Duration(v / time.Microsecond)
	return nil
}

// Seconds returns d in seconds.
func (d Duration) Seconds() float64 { return float64(d) / 1e6 }

// Load reads and validates a spec file.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path, filepath.Dir(path))
}

// Parse decodes and validates a spec; name is used in messages and dir
// resolves relative paths in the spec.
func Parse(data []byte, name, dir string) (*Spec, error) {
	s := &Spec{file: name, dir: dir}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlcheck.Clean(name, err)
	}
	s.root = &root
	if len(root.Content) > 0 {
		if _, err := yamlcheck.Check(name, &root, reflect.TypeOf(Spec{})); err != nil {
			return nil, err
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty spec", name)
		}
		return nil, yamlcheck.Clean(name, err)
	}
	if err := s.compile(); err != nil {
		return nil, err
	}
	return s, nil
}

// path is a location in the spec: mapping keys (string) and sequence indices (int).
type path []any

func (p path) add(e ...any) path {
	return append(append(path(nil), p...), e...)
}

// line returns the line of the node at p, or of its deepest existing ancestor.
func (s *Spec) line(p path) int {
	if s.root == nil {
		return 0
	}
	n := s.root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	best := n.Line
	for _, e := range p {
		var next *yaml.Node
		switch k := e.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
						best = n.Content[i].Line
						break
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				next = n.Content[k]
				best = next.Line
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return best
}

// errAt formats a validation error with the spec's file and line.
func (s *Spec) errAt(p path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if l := s.line(p); l > 0 {
		return fmt.Errorf("%s:%d: %s", s.file, l, msg)
	}
	return fmt.Errorf("%s: %s", s.file, msg)
}

// resolve makes a spec-relative path usable.
func (s *Spec) resolve(p string) string {
	if filepath.IsAbs(p) || s.dir == "" {
		return p
	}
	return filepath.Join(s.dir, p)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
