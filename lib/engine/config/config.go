// Package config is the cluster YAML: deployments of models on GPUs, each
// with pools of replicas, behind one router. Today's flat file (model, gpu,
// replicas, engine, latency at the top level) stays valid and means one
// deployment with one monolithic pool.
package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/lib/roofline"
	"go.yaml.in/yaml/v3"
)

// Cluster is the whole config. Either the flat keys or Deployments are
// used, never both (Parse checks).
type Cluster struct {
	// Flat form: one deployment with one monolithic pool.
	Model       string  `yaml:"model,omitempty"`        // model name (latency model and KV sizing)
	GPU         string  `yaml:"gpu,omitempty"`          // GPU name or YAML file
	TP          int     `yaml:"tp,omitempty"`           // tensor-parallel degree of one replica
	WeightDtype string  `yaml:"weight_dtype,omitempty"` // "" = the model's own dtype
	KVDtype     string  `yaml:"kv_dtype,omitempty"`     // "" = same as activations
	Replicas    int     `yaml:"replicas,omitempty"`
	Engine      Engine  `yaml:"engine,omitempty"`
	Latency     Latency `yaml:"latency,omitempty"`
	// Parallel adds DP, EP and PP (parallel.go); nil: TP only.
	Parallel *Parallel `yaml:"parallel,omitempty"`
	// Speculative is speculative decoding (speculative.go); nil: off.
	Speculative *Speculative `yaml:"speculative,omitempty"`
	// LoRA is the LoRA adapters (lora.go); nil: none.
	LoRA *LoRA `yaml:"lora,omitempty"`

	Deployments []Deployment `yaml:"deployments,omitempty"`

	Seed uint64 `yaml:"seed"`
	// Horizon stops the simulation at this simulated time (0 = run to the end).
	Horizon Duration `yaml:"horizon"`
	// SnapshotInterval is how often the router's view of replica load is
	// refreshed (0 = live).
	SnapshotInterval Duration `yaml:"snapshot_interval"`
	// KVEventDelay is how late the router hears the replicas' KV-cache
	// events (blocks cached and evicted), which its prefix index and so
	// every policy's cached_blocks are built from (0 = live).
	KVEventDelay Duration `yaml:"kv_event_delay"`
	// ClientTimeout is how long a client waits for its request to finish
	// before giving up, for requests without their own timeout_us (0 = never).
	ClientTimeout Duration `yaml:"client_timeout"`
	Router        Router   `yaml:"router"`
	// Network delays each prompt's arrival at the router (network.go; off by default).
	Network Network `yaml:"network,omitempty"`
	// Policy is a policy bundle (docs/policies.md), relative to this file;
	// its stages replace the router's and the schedulers' built-ins.
	Policy string `yaml:"policy,omitempty"`

	// Name is the file the config came from, for messages.
	Name string `yaml:"-"`
	// lines maps key paths ("deployments[1].gpu") to their line in Name.
	lines map[string]int
}

// Deployment is one model served on one kind of GPU by pools of replicas.
type Deployment struct {
	ID      string   `yaml:"id"`
	Model   string   `yaml:"model"`
	Aliases []string `yaml:"aliases,omitempty"` // more request model names this deployment serves
	GPU     string   `yaml:"gpu"`
	TP      int      `yaml:"tp"`
	// Parallel adds DP, EP and PP (parallel.go); nil: TP only.
	Parallel *Parallel `yaml:"parallel,omitempty"`
	// Speculative is speculative decoding (speculative.go); nil: off.
	Speculative *Speculative `yaml:"speculative,omitempty"`
	// LoRA is the LoRA adapters (lora.go); nil: none.
	LoRA        *LoRA   `yaml:"lora,omitempty"`
	WeightDtype string  `yaml:"weight_dtype,omitempty"`
	KVDtype     string  `yaml:"kv_dtype,omitempty"`
	Engine      Engine  `yaml:"engine"`
	Latency     Latency `yaml:"latency"`
	Pools       []Pool  `yaml:"pools"`
	// KV adds lower KV tiers (CPU, storage); nil = GPU only.
	KV *KV `yaml:"kv,omitempty"`
	// KVTransfer is the prefill→decode KV link of a P/D deployment; nil =
	// the defaults (DefaultKVTransfer).
	KVTransfer *KVTransfer `yaml:"kv_transfer,omitempty"`
	// GPUHourUSD is the price of one GPU-hour, for the cost in blis-report
	// (0 = not priced).
	GPUHourUSD float64 `yaml:"gpu_hour_usd,omitempty"`
	// PD decides which requests of a P/D deployment go to its prefill pool
	// (nil = every request: decider always).
	PD *PD `yaml:"pd,omitempty"`
	// Encode is how an encode pool ships image embeddings (required with
	// an encode pool).
	Encode *Encode `yaml:"encode,omitempty"`
}

// Pool is a set of identical replicas with one role.
type Pool struct {
	// Role is monolithic, prefill or decode (disaggregated serving), or
	// encode (multimodal requests' images, E/P/D).
	Role     string `yaml:"role"`
	Replicas int    `yaml:"replicas"`
	// MinReplicas and MaxReplicas bound an autoscaled pool; 0 means
	// "= replicas".
	MinReplicas int `yaml:"min_replicas,omitempty"`
	MaxReplicas int `yaml:"max_replicas,omitempty"`
	// Autoscaler, when set, adds and removes the pool's replicas within
	// its bounds (see Bounds and autoscale.go); replicas is then the count
	// at the start (0 allowed).
	Autoscaler *Autoscaler `yaml:"autoscaler,omitempty"`

	// Hardware of the pool's own (heterogeneous P/D, pd.go): a GPU and TP
	// other than the deployment's, engine keys merged over the
	// deployment's (a nil Engine is the deployment's), and a latency
	// section in place of the deployment's (nil: the deployment's).
	GPU        string   `yaml:"gpu,omitempty"`
	TP         int      `yaml:"tp,omitempty"`
	Engine     *Engine  `yaml:"engine,omitempty"`
	Latency    *Latency `yaml:"latency,omitempty"`
	GPUHourUSD float64  `yaml:"gpu_hour_usd,omitempty"`
	// LinkGBs is the pool's network bandwidth for KV and embedding
	// transfers, 10^9 B/s per replica (engine.Prepare fills it: the
	// kv_transfer bandwidth, or its link's default for the pool's GPU and
	// TP).
	LinkGBs float64 `yaml:"-"`
}

// Engine holds one replica's vLLM-v1 scheduler and KV-cache settings.
type Engine struct {
	BlockSize            int     `yaml:"block_size"`                   // tokens per KV block (vLLM --block-size)
	MaxNumBatchedTokens  int     `yaml:"max_num_batched_tokens"`       // token budget per step (0 = vllm serve's default for the GPU, ServeLimits)
	MaxNumSeqs           int     `yaml:"max_num_seqs"`                 // running requests per replica (0 = vllm serve's default for the GPU)
	LongPrefillThreshold int     `yaml:"long_prefill_token_threshold"` // max prefill chunk per request per step (0 = off)
	KVBlocks             int64   `yaml:"kv_blocks"`                    // KV blocks per replica (0 = computed from GPU memory)
	GPUMemoryUtilization float64 `yaml:"gpu_memory_utilization"`
	PrefixCaching        bool    `yaml:"enable_prefix_caching"`
	SchedulingPolicy     string  `yaml:"scheduling_policy"` // fcfs | priority
	// AsyncScheduling is vLLM's async scheduling (its default since 0.14):
	// the next step is formed while the current one runs, so a request
	// that arrives during step n is first scheduled in step n+2.
	AsyncScheduling bool `yaml:"async_scheduling"`
	// DisableHybridKVCacheManager is vLLM's --disable-hybrid-kv-cache-manager:
	// a model with sliding-window layers then keeps every layer's KV for
	// every token, as one without windows (HybridKV).
	DisableHybridKVCacheManager bool `yaml:"disable_hybrid_kv_cache_manager"`
	// KVLayout is the model's hybrid KV layout when its layers mix full
	// and sliding-window attention (nil: one kind), a property of the
	// model that engine.Prepare fills from it; Deployment.HybridKV says
	// whether the engine keeps it.
	KVLayout *roofline.KVGroups `yaml:"-"`
	// budgetOf names the GPU whose default gave MaxNumBatchedTokens
	// (FillLimits), for the error when max_num_seqs exceeds it.
	budgetOf string
}

// Router selects the router pipeline's built-in policies by name.
type Router struct {
	Admission string `yaml:"admission"` // always | queue-limit | token-bucket | tier-shed
	// QueueLimit is queue-limit admission's Σ (waiting + in flight) limit.
	QueueLimit int    `yaml:"queue_limit"`
	Priority   string `yaml:"priority"` // fcfs | request
	Routing    string `yaml:"routing"`  // round-robin | least-loaded | least-kv | prefix-affinity | weighted | random | power-of-two
	// Weights of the weighted router's scorers (load, kv, prefix).
	Weights map[string]float64 `yaml:"weights"`
	// AdmissionParams are the admission template's parameters
	// (token-bucket's rate and burst, tier-shed's thresholds).
	AdmissionParams map[string]float64 `yaml:"admission_params,omitempty"`
	// FlowControl queues admitted requests at the gateway while the pool
	// is saturated (flowcontrol.go); nil: routed on arrival.
	FlowControl *FlowControl `yaml:"flow_control,omitempty"`
}

// Latency selects the step-time model. Beta (and optionally Alpha) given
// here make a linear model that needs no catalogue.
type Latency struct {
	Mode         string    `yaml:"mode"`         // auto | roofline | fitted | linear
	Coefficients string    `yaml:"coefficients"` // fitted coefficients file
	Beta         []float64 `yaml:"beta"`         // β0 µs/step, β1 µs/prefill token, β2 µs/decode token
	Alpha        []float64 `yaml:"alpha"`        // α0 µs, α1 µs/input token, α2 µs/output token
	// ImageEncodeUS is the vision encoder's time per image, added to the
	// step that schedules a request's first prefill chunk (0 = off).
	ImageEncodeUS float64 `yaml:"image_encode_us,omitempty"`
}

// DefaultEngine is vLLM v1's engine defaults (async scheduling is vLLM's
// default since 0.14). The batch limits are left 0: they depend on the GPU
// (ServeLimits), and Validate fills them once the GPU is known.
func DefaultEngine() Engine {
	return Engine{BlockSize: 16, GPUMemoryUtilization: 0.9, PrefixCaching: true, SchedulingPolicy: "fcfs", AsyncScheduling: true}
}

// ServeLimits is what `vllm serve` (vLLM 0.9 and later, EngineArgs' batch
// defaults for the OpenAI server) takes for max_num_seqs and
// max_num_batched_tokens when neither is given: 1024 and 8192 on a GPU with
// at least 70 GiB that is not an A100 (H100, H200, B200, RTX PRO 6000), 256
// and 2048 on the others. vLLM keeps A100s small because the larger token
// budget cost them throughput (vLLM PR 17885).
func ServeLimits(g roofline.GPU) (seqs, tokens int) {
	if g.MemoryGiB >= 70 && !strings.Contains(strings.ToLower(g.Name), "a100") {
		return 1024, 8192
	}
	return 256, 2048
}

// FillLimits sets e's unset (0) batch limits to vllm serve's on gpu: the
// token budget first, then max_num_seqs capped by it, as vLLM does. An
// unknown GPU leaves them 0: engine.Prepare reports the GPU.
func (e *Engine) FillLimits(gpu string) {
	if e.MaxNumSeqs != 0 && e.MaxNumBatchedTokens != 0 {
		return
	}
	g, err := roofline.LoadGPU(gpu)
	if err != nil {
		return
	}
	seqs, tokens := ServeLimits(g)
	if e.MaxNumBatchedTokens == 0 {
		e.MaxNumBatchedTokens, e.budgetOf = tokens, g.Name
	}
	if e.MaxNumSeqs == 0 {
		e.MaxNumSeqs = min(seqs, e.MaxNumBatchedTokens)
	}
}

// limitsUnset reports whether e leaves a batch limit to the GPU's default.
func (e *Engine) limitsUnset() bool { return e.MaxNumSeqs == 0 || e.MaxNumBatchedTokens == 0 }

// fillEngineLimits gives every engine that leaves a batch limit unset
// vllm serve's default for the GPU it runs on: a pool on a GPU of its own
// takes its GPU's, even when it inherits the deployment's other engine keys.
func (c *Cluster) fillEngineLimits() {
	if c.IsFlat() {
		c.Engine.FillLimits(c.GPU)
		return
	}
	for i := range c.Deployments {
		d := &c.Deployments[i]
		for j := range d.Pools {
			p := &d.Pools[j]
			gpu := d.GPU
			if p.GPU != "" {
				gpu = p.GPU
			}
			switch {
			case p.Engine != nil:
				p.Engine.FillLimits(gpu)
			case p.GPU != "" && d.Engine.limitsUnset():
				e := d.Engine
				e.FillLimits(gpu)
				p.Engine = &e
			}
		}
		d.Engine.FillLimits(d.GPU)
	}
}

// DefaultKVEventDelay is how late a router hears KV-cache events by
// default: 50 ms, upstream BLIS's default cache-signal delay, which models
// the propagation of llm-d's KV events (vLLM publishes them over ZMQ to the
// scheduler's KV-cache indexer), the same as the 50 ms at which llm-d's
// endpoint picker refreshes replica metrics (Gateway API Inference
// Extension, DefaultRefreshMetricsInterval).
const DefaultKVEventDelay = Duration(50 * time.Millisecond)

// Default returns the defaults: one Llama-3.1-8B replica on an H100 at TP1
// with vLLM v1's scheduler defaults, round-robin routing, KV events heard
// 50 ms late.
func Default() Cluster {
	return Cluster{
		Model: "llama-3.1-8b", GPU: "h100", TP: 1, Replicas: 1, Seed: 42, KVEventDelay: DefaultKVEventDelay,
		Engine:  DefaultEngine(),
		Router:  Router{Admission: "always", Priority: "fcfs", Routing: "round-robin"},
		Latency: Latency{Mode: "auto"},
	}
}

// defaultDeployment is what a deployment's absent keys mean.
func defaultDeployment() Deployment {
	return Deployment{TP: 1, Engine: DefaultEngine(), Latency: Latency{Mode: "auto"}}
}

// UnmarshalYAML fills absent keys with their defaults; a pool's engine
// keys are read over the deployment's, a pool's latency section over the
// defaults (mergePools).
func (d *Deployment) UnmarshalYAML(n *yaml.Node) error {
	*d = defaultDeployment()
	type plain Deployment
	if err := n.Decode((*plain)(d)); err != nil {
		return err
	}
	return d.mergePools(n)
}

// UnmarshalYAML fills absent keys with their defaults.
func (p *Pool) UnmarshalYAML(n *yaml.Node) error {
	*p = Pool{Role: "monolithic"}
	type plain Pool
	return n.Decode((*plain)(p))
}

// IsFlat reports whether the config uses the flat form.
func (c *Cluster) IsFlat() bool { return len(c.Deployments) == 0 }

// Resolved returns the deployments the config means: the flat form becomes
// one deployment (id: the model's catalogue name, or "default") with one
// monolithic pool.
func (c *Cluster) Resolved() []Deployment {
	if !c.IsFlat() {
		return c.Deployments
	}
	id := "default"
	if m, ok := roofline.LookupModel(c.Model); ok {
		id = m.ShortName()
	}
	return []Deployment{{ID: id, Model: c.Model, GPU: c.GPU, TP: c.TP, Parallel: c.Parallel, Speculative: c.Speculative, LoRA: c.LoRA, WeightDtype: c.WeightDtype, KVDtype: c.KVDtype,
		Engine: c.Engine, Latency: c.Latency, Pools: []Pool{{Role: "monolithic", Replicas: c.Replicas}}}}
}

// Where prefixes msg with the file and line of a key path when known
// ("cluster.yaml:7: deployments[1].gpu: msg"), else with the key path.
func (c *Cluster) Where(path, msg string) string {
	if line, ok := c.lines[path]; ok && c.Name != "" {
		return fmt.Sprintf("%s:%d: %s: %s", c.Name, line, path, msg)
	}
	if c.Name != "" && c.Name != "flags" {
		return fmt.Sprintf("%s: %s: %s", c.Name, path, msg)
	}
	return fmt.Sprintf("%s: %s", path, msg)
}

// DeploymentKey is the key path of deployment i's key: "deployments[i].key",
// or "key" in the flat form ("replicas" for the pool's replicas).
func (c *Cluster) DeploymentKey(i int, key string) string {
	if c.IsFlat() {
		if key == "pools[0].replicas" {
			return "replicas"
		}
		return key
	}
	return fmt.Sprintf("deployments[%d].%s", i, key)
}

// Duration is a time.Duration that reads "30s", "10m", "1h" (or a number of
// seconds) from YAML.
type Duration time.Duration

// US returns the duration in microseconds.
func (d Duration) US() int64 { return time.Duration(d).Microseconds() }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// YAMLScalar describes a Duration for yamlcheck's messages.
func (*Duration) YAMLScalar() string { return "a duration such as 90s, 10m or 1h (or seconds)" }

// YAMLScalarForm refuses a negative duration, so that yamlcheck names its
// key (other malformed values are reported by UnmarshalYAML).
func (*Duration) YAMLScalarForm(v string) error {
	if strings.HasPrefix(strings.TrimSpace(v), "-") {
		return fmt.Errorf("expected a non-negative duration, found %q", v)
	}
	return nil
}

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
	if numberRE.MatchString(s) {
		secs, _ := strconv.ParseFloat(s, 64)
		return Duration(secs * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("expected a duration such as 90s, 10m or 1h (or seconds), found %q", s)
}

var numberRE = regexp.MustCompile(`^[0-9]+(\.[0-9]*)?$`)

// Autoscaled reports whether some pool of the cluster has an autoscaler.
func (c *Cluster) Autoscaled() bool {
	for _, d := range c.Resolved() {
		for _, p := range d.Pools {
			if p.Autoscaler != nil {
				return true
			}
		}
	}
	return false
}
