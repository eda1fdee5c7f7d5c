package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/lib/latency"
	"go.yaml.in/yaml/v3"
)

// Config is the cluster YAML. Every field has a default (DefaultConfig); zero
// values in a file mean "use the default" only where documented.
type Config struct {
	Model       string `yaml:"model"`        // model name for the latency model and KV sizing
	GPU         string `yaml:"gpu"`          // GPU name
	TP          int    `yaml:"tp"`           // tensor-parallel degree of one replica
	WeightDtype string `yaml:"weight_dtype"` // "" = the model's own dtype
	KVDtype     string `yaml:"kv_dtype"`     // "" = same as weights
	Replicas    int    `yaml:"replicas"`
	Seed        uint64 `yaml:"seed"`
	// Horizon stops the simulation at this simulated time (0 = run to the end).
	Horizon Duration `yaml:"horizon"`
	// SnapshotInterval is how often the router's view of instance load is
	// refreshed (0 = live).
	SnapshotInterval Duration      `yaml:"snapshot_interval"`
	Engine           EngineConfig  `yaml:"engine"`
	Router           RouterConfig  `yaml:"router"`
	Latency          LatencyConfig `yaml:"latency"`
}

// EngineConfig holds one replica's vLLM-v1 scheduler and KV-cache settings.
type EngineConfig struct {
	BlockSize            int     `yaml:"block_size"`                   // tokens per KV block (vLLM --block-size)
	MaxNumBatchedTokens  int     `yaml:"max_num_batched_tokens"`       // token budget per step
	MaxNumSeqs           int     `yaml:"max_num_seqs"`                 // running requests per replica
	LongPrefillThreshold int     `yaml:"long_prefill_token_threshold"` // max prefill chunk per request per step (0 = off)
	KVBlocks             int64   `yaml:"kv_blocks"`                    // KV blocks per replica (0 = computed from GPU memory)
	GPUMemoryUtilization float64 `yaml:"gpu_memory_utilization"`
	PrefixCaching        bool    `yaml:"enable_prefix_caching"`
	SchedulingPolicy     string  `yaml:"scheduling_policy"` // fcfs | priority
}

// RouterConfig selects the router pipeline stages by name.
type RouterConfig struct {
	Admission string `yaml:"admission"` // always | queue-limit
	// QueueLimit is the cluster-wide waiting+in-flight limit of queue-limit admission.
	QueueLimit int    `yaml:"queue_limit"`
	Priority   string `yaml:"priority"` // fcfs | request
	Routing    string `yaml:"routing"`  // round-robin | least-loaded | least-kv | prefix-affinity | weighted
	// Weights of the weighted router's scorers (load, kv, prefix).
	Weights map[string]float64 `yaml:"weights"`
}

// LatencyConfig selects the step-time model. Beta (and optionally Alpha)
// given here make a linear model that needs no catalogue.
type LatencyConfig struct {
	Mode         string    `yaml:"mode"`         // auto | roofline | fitted | linear
	Coefficients string    `yaml:"coefficients"` // fitted coefficients file
	Beta         []float64 `yaml:"beta"`         // β0 µs/step, β1 µs/prefill token, β2 µs/decode token
	Alpha        []float64 `yaml:"alpha"`        // α0 µs, α1 µs/input token, α2 µs/output token
}

// Duration is a time.Duration that reads "30s", "10m", "1h" (or a number of
// seconds) from YAML.
type Duration time.Duration

// US returns the duration in microseconds.
func (d Duration) US() int64 { return time.Duration(d).Microseconds() }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalYAML reads a Go duration string or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*d = v
	return nil
}

// ParseDuration reads "90s", "1h30m" or a bare number of seconds.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if v, err := time.ParseDuration(s); err == nil {
		if v < 0 {
			return 0, fmt.Errorf("expected a non-negative duration, found %q", s)
		}
		return Duration(v), nil
	}
	if isNumber(s) {
		secs, _ := strconv.ParseFloat(s, 64)
		return Duration(secs * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("expected a duration such as 90s, 10m or 1h (or seconds), found %q", s)
}

var numberRE = regexp.MustCompile(`^[0-9]+(\.[0-9]*)?$`)

func isNumber(s string) bool { return numberRE.MatchString(s) }

// DefaultConfig returns the defaults: one Llama-3.1-8B replica on an H100 at
// TP1 with vLLM v1's scheduler defaults.
func DefaultConfig() Config {
	return Config{
		Model: "llama-3.1-8b", GPU: "h100", TP: 1, Replicas: 1, Seed: 42,
		Engine: EngineConfig{
			BlockSize: 16, MaxNumBatchedTokens: 8192, MaxNumSeqs: 256,
			GPUMemoryUtilization: 0.9, PrefixCaching: true, SchedulingPolicy: "fcfs",
		},
		Router:  RouterConfig{Admission: "always", Priority: "fcfs", Routing: "round-robin"},
		Latency: LatencyConfig{Mode: "auto"},
	}
}

// LoadConfig reads a cluster YAML over the defaults. Unknown keys and bad
// values are errors naming the file and line.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, b)
}

var lineRE = regexp.MustCompile(`line ([0-9]+): `)

// ParseConfig is LoadConfig on bytes; name is used in errors.
func ParseConfig(name string, b []byte) (Config, error) {
	c := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
		msg = strings.TrimSpace(msg)
		// "line 7: field x not found" -> "file:7: field x not found"
		msg = lineRE.ReplaceAllString(msg, name+":$1: ")
		if !strings.HasPrefix(msg, name) {
			msg = name + ": " + msg
		}
		return c, errors.New(msg)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// Upper bounds of the config: far above real deployments (vLLM's largest
// block sizes are in the low thousands), low enough to stay in memory.
const (
	MaxReplicas  = 100000
	MaxBlockSize = 4096
)

// Validate checks values that decoding cannot.
func (c *Config) Validate() error {
	e := &c.Engine
	switch {
	case c.Replicas < 1:
		return fmt.Errorf("replicas: expected >= 1, found %d", c.Replicas)
	case c.Replicas > MaxReplicas:
		// About 1 KB each before any work: 10^8 replicas exhausted memory.
		return fmt.Errorf("replicas: expected <= %d, found %d", MaxReplicas, c.Replicas)
	case c.TP < 1:
		return fmt.Errorf("tp: expected >= 1, found %d", c.TP)
	case e.BlockSize < 1:
		return fmt.Errorf("engine.block_size: expected >= 1, found %d", e.BlockSize)
	case e.BlockSize > MaxBlockSize:
		// Each replica keeps one decode bucket per block offset.
		return fmt.Errorf("engine.block_size: expected <= %d, found %d", MaxBlockSize, e.BlockSize)
	case e.MaxNumSeqs > math.MaxInt32:
		return fmt.Errorf("engine.max_num_seqs: expected <= %d, found %d", math.MaxInt32, e.MaxNumSeqs)
	case e.MaxNumBatchedTokens > math.MaxInt32:
		// Token counts are int32 in the scheduler: larger values wrapped.
		return fmt.Errorf("engine.max_num_batched_tokens: expected <= %d, found %d", math.MaxInt32, e.MaxNumBatchedTokens)
	case e.LongPrefillThreshold > math.MaxInt32:
		return fmt.Errorf("engine.long_prefill_token_threshold: expected <= %d, found %d", math.MaxInt32, e.LongPrefillThreshold)
	case e.MaxNumSeqs < 1:
		return fmt.Errorf("engine.max_num_seqs: expected >= 1, found %d", e.MaxNumSeqs)
	case e.MaxNumBatchedTokens < e.MaxNumSeqs:
		// vLLM refuses this too: every running request must be able to decode each step.
		return fmt.Errorf("engine.max_num_batched_tokens (%d) must be >= engine.max_num_seqs (%d)", e.MaxNumBatchedTokens, e.MaxNumSeqs)
	case e.LongPrefillThreshold < 0:
		return fmt.Errorf("engine.long_prefill_token_threshold: expected >= 0, found %d", e.LongPrefillThreshold)
	case e.KVBlocks < 0:
		return fmt.Errorf("engine.kv_blocks: expected >= 0, found %d", e.KVBlocks)
	case e.KVBlocks > 1<<31-1:
		return fmt.Errorf("engine.kv_blocks: expected < 2^31, found %d", e.KVBlocks)
	case e.GPUMemoryUtilization <= 0 || e.GPUMemoryUtilization > 1:
		return fmt.Errorf("engine.gpu_memory_utilization: expected in (0, 1], found %g", e.GPUMemoryUtilization)
	case e.SchedulingPolicy != "fcfs" && e.SchedulingPolicy != "priority":
		return fmt.Errorf("engine.scheduling_policy: expected fcfs or priority, found %q", e.SchedulingPolicy)
	}
	if _, err := newAdmission(c.Router); err != nil {
		return err
	}
	if _, err := newPriority(c.Router.Priority); err != nil {
		return err
	}
	if _, err := newRouting(c.Router); err != nil {
		return err
	}
	l := c.Latency
	switch l.Mode {
	case "auto", "roofline", "fitted", "linear":
	default:
		return fmt.Errorf("latency.mode: expected auto, roofline, fitted or linear, found %q", l.Mode)
	}
	if len(l.Beta) != 0 && len(l.Beta) != 3 {
		return fmt.Errorf("latency.beta: expected 3 coefficients [β0, β1, β2], found %d", len(l.Beta))
	}
	if len(l.Alpha) != 0 && len(l.Alpha) != 3 {
		return fmt.Errorf("latency.alpha: expected 3 coefficients [α0, α1, α2], found %d", len(l.Alpha))
	}
	for _, v := range append(append([]float64(nil), l.Beta...), l.Alpha...) {
		if v < 0 {
			return fmt.Errorf("latency: coefficients must be >= 0, found %g", v)
		}
	}
	if l.Mode == "linear" && len(l.Beta) == 0 {
		return errors.New("latency.mode linear needs latency.beta")
	}
	return nil
}

// LinearModel returns the linear model given by latency.beta/alpha, if any.
func (c *Config) LinearModel() (*latency.Linear, bool) {
	l := c.Latency
	if len(l.Beta) != 3 || (l.Mode != "linear" && l.Mode != "auto") {
		return nil, false
	}
	m := &latency.Linear{Beta0: l.Beta[0], Beta1: l.Beta[1], Beta2: l.Beta[2], Label: "linear:config"}
	if len(l.Alpha) == 3 {
		m.A = latency.Alpha{QueueBase: l.Alpha[0], QueuePerInputToken: l.Alpha[1], PerOutputToken: l.Alpha[2]}
	}
	return m, true
}

// YAML renders the effective config (for --print-config).
func (c Config) YAML() string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(c) // plain structs: cannot fail
	return buf.String()
}
