// Package infperf reads an inference-perf benchmark config (the
// kubernetes-sigs/inference-perf load generator Kubernetes' serving stack
// benchmarks with) and writes the requests it sends, stage by stage, as a
// BLIS requests table: its data: section (shared_prefix with multi-turn
// chat, random and synthetic lengths) and load: section (constant,
// poisson and concurrent stages, rates, durations, the workers' cap on
// requests in flight, the request timeout). Both its input config and the
// resolved results/config.yaml it writes after a run are read. A key that
// changes the requests but cannot be honoured is an error naming file,
// line and key; what is approximated is said in a Note. docs/workload.md,
// "inference-perf configs".
package infperf

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/yamlcheck"
)

// Config is an inference-perf config: the sections that shape the
// requests are typed, the others (report, storage, metrics, tokenizer)
// are accepted and not read.
type Config struct {
	API             *API    `yaml:"api"`
	Data            *Data   `yaml:"data"`
	Load            *Load   `yaml:"load"`
	Server          *Server `yaml:"server"`
	Metrics         any     `yaml:"metrics"`
	Report          any     `yaml:"report"`
	Storage         any     `yaml:"storage"`
	Tokenizer       any     `yaml:"tokenizer"`
	CircuitBreakers any     `yaml:"circuit_breakers"`

	name  string
	lines map[string]int
}

// API is the api: section.
type API struct {
	Type                  string `yaml:"type"` // completion (default) or chat
	Streaming             *bool  `yaml:"streaming"`
	Headers               any    `yaml:"headers"`
	SLOUnit               any    `yaml:"slo_unit"`
	SLOTPOTHeader         any    `yaml:"slo_tpot_header"`
	SLOTTFTHeader         any    `yaml:"slo_ttft_header"`
	ResponseFormat        any    `yaml:"response_format"`
	SessionIDHeaderKey    any    `yaml:"session_id_header_key"`
	SessionTokenHeaderKey any    `yaml:"session_token_header_key"`
}

// Server is the server: section; only ignore_eos shapes the requests.
type Server struct {
	Type      any   `yaml:"type"`
	ModelName any   `yaml:"model_name"`
	BaseURL   any   `yaml:"base_url"`
	IgnoreEOS *bool `yaml:"ignore_eos"`
	APIKey    any   `yaml:"api_key"`
	CertPath  any   `yaml:"cert_path"`
	KeyPath   any   `yaml:"key_path"`
}

// Data is the data: section.
type Data struct {
	Type               string        `yaml:"type"`
	Path               any           `yaml:"path"`
	CorpusFilePath     any           `yaml:"corpus_file_path"`
	InputDistribution  *Distribution `yaml:"input_distribution"`
	OutputDistribution *Distribution `yaml:"output_distribution"`
	SharedPrefix       *SharedPrefix `yaml:"shared_prefix"`
	Multimodal         any           `yaml:"multimodal"`
	Trace              any           `yaml:"trace"`
	OTelTraceReplay    any           `yaml:"otel_trace_replay"`
	WekaTraceReplay    any           `yaml:"weka_trace_replay"`
	ConversationReplay any           `yaml:"conversation_replay"`
	VisionArena        any           `yaml:"visionarena"`
	UseChatTemplate    *bool         `yaml:"use_chat_template"`
}

// Distribution is inference-perf's length distribution (tokens).
type Distribution struct {
	Min        *int     `yaml:"min"`
	Max        *int     `yaml:"max"`
	Mean       *float64 `yaml:"mean"`
	StdDev     *float64 `yaml:"std_dev"`
	TotalCount *int     `yaml:"total_count"`
	Type       string   `yaml:"type"`
	Variance   *float64 `yaml:"variance"`
	Skew       *float64 `yaml:"skew"`
}

// Length is a token length: a fixed integer or a Distribution.
type Length struct {
	Distribution `yaml:",inline"`
	fixed        *int
}

// UnmarshalYAML reads an integer or a distribution mapping.
func (l *Length) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		v, err := strconv.Atoi(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: expected an integer or a distribution, found %q", n.Line, n.Value)
		}
		l.fixed = &v
		return nil
	}
	return n.Decode(&l.Distribution)
}

// YAMLScalarForm accepts an integer.
func (*Length) YAMLScalarForm(v string) error {
	if _, err := strconv.Atoi(v); err != nil {
		return fmt.Errorf("expected an integer or a distribution mapping, found %q", v)
	}
	return nil
}

// SharedPrefix is data.shared_prefix (both spellings of its counts).
type SharedPrefix struct {
	NumGroups               *int          `yaml:"num_groups"`
	NumUniqueSystemPrompts  *int          `yaml:"num_unique_system_prompts"`
	NumPromptsPerGroup      *int          `yaml:"num_prompts_per_group"`
	NumUsersPerSystemPrompt *int          `yaml:"num_users_per_system_prompt"`
	SystemPromptLen         *Length       `yaml:"system_prompt_len"`
	QuestionLen             *Length       `yaml:"question_len"`
	OutputLen               *Length       `yaml:"output_len"`
	Seed                    *uint64       `yaml:"seed"`
	QuestionDistribution    *Distribution `yaml:"question_distribution"`
	OutputDistribution      *Distribution `yaml:"output_distribution"`
	EnableMultiTurnChat     *bool         `yaml:"enable_multi_turn_chat"`
	Multimodal              any           `yaml:"multimodal"`
}

// Load is the load: section.
type Load struct {
	Type                    string   `yaml:"type"`
	Interval                *float64 `yaml:"interval"`
	Stages                  []Stage  `yaml:"stages"`
	Sweep                   any      `yaml:"sweep"`
	NumWorkers              *int     `yaml:"num_workers"`
	WorkerMaxConcurrency    *int     `yaml:"worker_max_concurrency"`
	WorkerMaxTCPConnections any      `yaml:"worker_max_tcp_connections"`
	Trace                   any      `yaml:"trace"`
	CircuitBreakers         any      `yaml:"circuit_breakers"`
	RequestTimeout          *float64 `yaml:"request_timeout"`
	LoRATrafficSplit        any      `yaml:"lora_traffic_split"`
	BaseSeed                *uint64  `yaml:"base_seed"`
}

// Stage is one load stage.
type Stage struct {
	Rate               *float64 `yaml:"rate"`
	Duration           *float64 `yaml:"duration"`
	NumRequests        *int     `yaml:"num_requests"`
	ConcurrencyLevel   *int     `yaml:"concurrency_level"`
	ConcurrentSessions any      `yaml:"concurrent_sessions"`
	SessionRate        any      `yaml:"session_rate"`
	NumSessions        any      `yaml:"num_sessions"`
	Timeout            any      `yaml:"timeout"`
}

// Parse reads an inference-perf config (YAML, or the one-line JSON its
// profiles are often written in). name is the file name for messages.
func Parse(data []byte, name string) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlcheck.Clean(name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		return nil, fmt.Errorf("%s: empty inference-perf config", name)
	}
	lines, err := yamlcheck.Check(name, &doc, reflect.TypeOf(Config{}))
	if err != nil {
		return nil, err
	}
	c := &Config{name: name, lines: lines}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return nil, yamlcheck.Clean(name, err)
	}
	c.name, c.lines = name, lines
	return c, nil
}

// Looks reports whether a YAML document is an inference-perf config rather
// than a BLIS workload spec: a mapping with load: or data: and without
// version: (which every BLIS spec has).
func Looks(data []byte) bool {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil || top == nil {
		return false
	}
	_, v := top["version"]
	_, l := top["load"]
	_, d := top["data"]
	return !v && (l || d)
}

// errAt is an error at key path (its line when known).
func (c *Config) errAt(path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	for p := path; p != ""; {
		if l, ok := c.lines[p]; ok {
			return fmt.Errorf("%s:%d: %s: %s", c.name, l, path, msg)
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return fmt.Errorf("%s: %s: %s", c.name, path, msg)
}

// set reports whether a free-form value was given (not null, not an empty
// list or mapping, not false, 0 or ""): the resolved config inference-perf
// writes lists every key, most at such defaults.
func set(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	case bool:
		return x
	case string:
		return x != ""
	case int:
		return x != 0
	case float64:
		return x != 0
	}
	return true
}
