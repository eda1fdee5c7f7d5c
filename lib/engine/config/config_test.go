package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/yamlcheck"
	"go.yaml.in/yaml/v3"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string // want: "" = ok, else a substring of the error
	}{
		{"empty", "", ""},
		{"full", `model: llama-3.1-8b
gpu: h100
tp: 2
replicas: 4
seed: 7
horizon: 10m
snapshot_interval: 50ms
engine:
  block_size: 16
  max_num_batched_tokens: 4096
  max_num_seqs: 128
  long_prefill_token_threshold: 512
  kv_blocks: 20000
  gpu_memory_utilization: 0.85
  enable_prefix_caching: false
  scheduling_policy: priority
router:
  admission: queue-limit
  queue_limit: 100
  priority: request
  routing: weighted
  weights: {load: 1, prefix: 2}
latency:
  mode: linear
  beta: [6000, 0.05, 30]
  alpha: [1000, 0.1, 20]
`, ""},
		{"unknown key", "replicas: 2\nengine:\n  kv_blokcs: 5\n", "c.yaml:3: engine.kv_blokcs: unknown key; did you mean kv_blocks? (expected one of block_size,"},
		{"bad type", "replicas: many\n", "c.yaml:1:"},
		{"bad duration", "horizon: soon\n", "c.yaml:1: expected a duration"},
		{"seconds duration", "horizon: 90\n", ""},
		{"zero replicas", "replicas: 0\n", "replicas: expected >= 1"},
		{"budget below seqs", "engine: {max_num_seqs: 512, max_num_batched_tokens: 256}\n", "must be >= engine.max_num_seqs"},
		{"bad router", "router: {routing: fastest}\n", "c.yaml:1: router.routing: expected one of round-robin"},
		{"router typo", "router: {routing: least-loded}\n", "router.routing: did you mean least-loaded?"},
		{"bad weight", "router: {routing: weighted, weights: {speed: 1}}\n", `router.weights.speed: routing policy weighted: unknown parameter "speed" (expected load, kv, prefix)`},
		// All-zero weights score every replica 0: everything went to replica 0.
		{"zero weights", "router: {routing: weighted, weights: {load: 0, prefix: 0}}\n", "router.weights: routing policy weighted: expected at least one weight > 0"},
		{"weights without weighted", "router: {weights: {load: 1}}\n", `router.weights.load: routing policy round-robin takes no parameters, found "load"`},
		{"bad beta", "latency: {beta: [1, 2]}\n", "latency.beta: expected 3"},
		{"negative beta", "latency: {beta: [1, -2, 3]}\n", "coefficients must be >= 0"},
		{"linear without beta", "latency: {mode: linear}\n", "needs latency.beta"},
		{"bad util", "engine: {gpu_memory_utilization: 1.5}\n", "gpu_memory_utilization"},
		{"bad policy", "engine: {scheduling_policy: lifo}\n", "scheduling_policy"},
		// Values beyond the engine's int32 counters wrapped (a threshold of
		// 2^32 became 0-token chunks: a hang) or exhausted memory.
		{"threshold beyond int32", "engine: {long_prefill_token_threshold: 4294967296}\n", "engine.long_prefill_token_threshold: expected <= 2147483647, found 4294967296"},
		{"budget beyond int32", "engine: {max_num_batched_tokens: 4294967297}\n", "engine.max_num_batched_tokens: expected <= 2147483647, found 4294967297"},
		{"seqs beyond int32", "engine: {max_num_seqs: 4294967296, max_num_batched_tokens: 4294967296}\n", "engine.max_num_seqs: expected <= 2147483647, found 4294967296"},
		{"huge block", "engine: {block_size: 1073741824}\n", "engine.block_size: expected <= 4096, found 1073741824"},
		{"largest block", "engine: {block_size: 4096}\n", ""},
		{"huge cluster", "replicas: 100000000\n", "replicas: expected <= 100000, found 100000000"},
		{"largest cluster", "replicas: 100000\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				// The printed config reads back to the same config.
				c2, err := Parse("printed", []byte(c.YAML()))
				if err != nil || c2.YAML() != c.YAML() {
					t.Fatalf("round trip: %v\n%s\n%s", err, c.YAML(), c2.YAML())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaultsAreVLLMs(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	e := c.Engine
	if e.BlockSize != 16 || e.MaxNumBatchedTokens != 8192 || e.MaxNumSeqs != 1024 || !e.PrefixCaching || e.GPUMemoryUtilization != 0.9 {
		t.Fatalf("%+v", e)
	}
}

// The batch limits left unset are vllm serve's for the GPU each engine runs
// on (vLLM's EngineArgs batch defaults): large on ≥ 70 GiB GPUs but A100s.
func TestServeLimitsFollowTheGPU(t *testing.T) {
	for _, tc := range []struct {
		name, yaml   string
		seqs, tokens []int // deployment (or flat) engine, then each own-engine pool
	}{
		{"h100", "gpu: h100\n", []int{1024}, []int{8192}},
		{"h200", "gpu: h200\n", []int{1024}, []int{8192}},
		{"b200", "gpu: b200\n", []int{1024}, []int{8192}},
		{"rtx pro 6000 (96 GB)", "gpu: rtxpro6000\n", []int{1024}, []int{8192}},
		{"a100 80 GB kept small", "gpu: a100-80gb\n", []int{256}, []int{2048}},
		{"l40s", "gpu: l40s\n", []int{256}, []int{2048}},
		{"rtx4090", "gpu: rtx4090\n", []int{256}, []int{2048}},
		{"explicit wins", "gpu: a100\nengine: {max_num_seqs: 512, max_num_batched_tokens: 4096}\n", []int{512}, []int{4096}},
		{"seqs capped by a given budget", "gpu: h100\nengine: {max_num_batched_tokens: 512}\n", []int{512}, []int{512}},
		{"budget alone from the GPU", "gpu: l40s\nengine: {max_num_seqs: 64}\n", []int{64}, []int{2048}},
		{"a pool on a GPU of its own takes its GPU's", "deployments:\n  - {id: a, model: llama-3.1-8b, gpu: h100, pools: [{replicas: 1}, {replicas: 1, gpu: a100}]}\n",
			[]int{1024, 256}, []int{8192, 2048}},
		{"a pool's own engine inherits given limits", "deployments:\n  - {id: a, model: llama-3.1-8b, gpu: h100, engine: {max_num_seqs: 100}, pools: [{replicas: 1}, {replicas: 1, gpu: a100, engine: {scheduling_policy: priority}}]}\n",
			[]int{100, 100}, []int{8192, 2048}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var seqs, tokens []int
			if c.IsFlat() {
				seqs, tokens = []int{c.Engine.MaxNumSeqs}, []int{c.Engine.MaxNumBatchedTokens}
			} else {
				d := c.Deployments[0]
				seqs, tokens = []int{d.Engine.MaxNumSeqs}, []int{d.Engine.MaxNumBatchedTokens}
				for _, p := range d.Pools {
					if p.Engine != nil {
						seqs, tokens = append(seqs, p.Engine.MaxNumSeqs), append(tokens, p.Engine.MaxNumBatchedTokens)
					}
				}
			}
			if !slices.Equal(seqs, tc.seqs) || !slices.Equal(tokens, tc.tokens) {
				t.Fatalf("max_num_seqs %v, max_num_batched_tokens %v; want %v, %v", seqs, tokens, tc.seqs, tc.tokens)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "replicas: 3\n", "deployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 2}]}\n", "engine: {kv_blocks: 10}\n", "router: {routing: weighted, weights: {kv: 2}}\n",
		"horizon: 1h\nsnapshot_interval: 0\n", "latency: {beta: [1,2,3], alpha: [4,5,6]}\n", "engine:\n  - 1\n",
		"deployments:\n  - id: a\n    model: m\n    gpu: h100\n    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 2}]\n    kv_transfer: {bandwidth_gb_s: 50, latency: 20us, granularity: stream, pipelined: true, layers: 32, routing: decode-first}\n",
		"deployments:\n  - id: a\n    model: m\n    gpu: h100\n    pools: [{replicas: 1}]\n    kv: {offload: threshold, threshold: 0.5, tiers: [{name: cpu, capacity_blocks: 100, bandwidth_gb_s: 1, eviction: lfu}, {name: storage, capacity_gib: 10}]}\n",
		"deployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 1, max_replicas: 4, autoscaler: {policy: hpa, target: 8, interval: 30s, provisioning: {dist: lognormal, median: 60s, sigma: 0.3}, warmup: {curve: step, duration: 1m, initial_factor: 2}, drain: {mode: redirect, timeout: 5m}, triggers: {queue_depth_above: 9}}}]}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("fuzz.yaml", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails validation: %v", err)
		}
	})
}

// Every cluster example parses, and prints back to itself.
func TestExampleYAMLRoundTrip(t *testing.T) {
	paths, err := filepath.Glob("../../../examples/clusters/*.yaml")
	if err != nil || len(paths) < 8 {
		t.Fatalf("cluster examples: %v %v", paths, err)
	}
	for _, p := range paths {
		c, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Parse("printed", []byte(c.YAML()))
		if err != nil || c2.YAML() != c.YAML() {
			t.Fatalf("%s: round trip: %v\n%s\n%s", p, err, c.YAML(), c2.YAML())
		}
	}
}

func TestExampleDeploymentsYAML(t *testing.T) {
	c, err := Load("../../../examples/clusters/deployments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Resolved()
	if len(d) != 2 || d[1].ID != "qwen32b-h200" || d[1].TP != 2 || d[1].Engine.MaxNumSeqs != 128 || d[1].Engine.BlockSize != 16 || d[0].Pools[0].Replicas != 4 {
		t.Fatalf("%+v", d)
	}
	// The printed form reads back to the same config.
	c2, err := Parse("printed", []byte(c.YAML()))
	if err != nil || c2.YAML() != c.YAML() {
		t.Fatalf("round trip: %v\n%s\n%s", err, c.YAML(), c2.YAML())
	}
}

func TestDeploymentsForm(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"minimal", "deployments:\n  - {id: a, model: llama-3.1-8b, gpu: h100, pools: [{replicas: 2}]}\n", ""},
		{"mixed forms", "replicas: 2\ndeployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 1}]}\n", "c.yaml:1: replicas: a top-level replicas cannot be combined with deployments: (line 2)"},
		{"no id", "deployments:\n  - {model: m, gpu: h100, pools: [{replicas: 1}]}\n", "c.yaml:2: deployments[0]: expected an id"},
		{"slash in id", "deployments:\n  - {id: a/b, model: m, gpu: h100, pools: [{replicas: 1}]}\n", "deployments[0].id: expected a name without '/'"},
		{"no model", "deployments:\n  - {id: a, gpu: h100, pools: [{replicas: 1}]}\n", "deployments[0]: expected a model"},
		{"no pools", "deployments:\n  - {id: a, model: m, gpu: h100}\n", "expected pools:"},
		{"duplicate ids", "deployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 1}]}\n  - {id: a, model: n, gpu: h100, pools: [{replicas: 1}]}\n", "c.yaml:3: deployments[1].id: duplicate deployment id \"a\" (first at deployments[0])"},
		{"zero replicas", "deployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 0}]}\n", "deployments[0].pools[0].replicas: expected >= 1, found 0"},
		{"unknown role", "deployments:\n  - {id: a, model: m, gpu: h100, pools: [{role: mixed, replicas: 1}]}\n", "deployments[0].pools[0].role: expected monolithic"},
		{"min above replicas", "deployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 2, min_replicas: 3}]}\n", "min_replicas: expected <= replicas (2), found 3"},
		{"max below replicas", "deployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 2, max_replicas: 1}]}\n", "max_replicas: expected >= replicas (2), found 1"},
		{"max_num_seqs over the GPU's budget", "deployments:\n  - {id: a, model: m, gpu: l40s, engine: {max_num_seqs: 4096}, pools: [{replicas: 1}]}\n", "c.yaml:2: deployments[0].engine.max_num_seqs: 4096 is more than the token budget, vllm serve's default on l40s (2048): every running request takes a token of each step; set deployments[0].engine.max_num_batched_tokens too"},
		{"engine error names the deployment", "deployments:\n  - {id: a, model: m, gpu: h100, engine: {max_num_seqs: -1}, pools: [{replicas: 1}]}\n", "deployments[0].engine.max_num_seqs: expected >= 1"},
		{"bad type", "deployments:\n  - {id: a, model: m, gpu: h100, tp: two, pools: [{replicas: 1}]}\n", "c.yaml:2: deployments[0].tp: expected an integer, found \"two\""},
		{"too many replicas", "deployments:\n  - {id: a, model: m, gpu: h100, pools: [{replicas: 60000}]}\n  - {id: b, model: m, gpu: h100, pools: [{replicas: 60000}]}\n", "the cluster would have more than 100000 replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yaml))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// examples/clusters/cluster.yaml claims "every key with its default": it must set
// every key of the flat form, and to its default.
func TestExampleClusterYAMLIsEveryKeyWithItsDefault(t *testing.T) {
	const path = "../../../examples/clusters/cluster.yaml"
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if err := d.Validate(); err != nil { // fills the GPU's batch limits, as Load did
		t.Fatal(err)
	}
	if got, want := c.YAML(), d.YAML(); got != want {
		t.Errorf("%s is not the defaults:\n%s\nwant\n%s", path, got, want)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	lines, err := yamlcheck.Check(path, &doc, reflect.TypeOf(Cluster{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range yamlcheck.Keys(reflect.TypeOf(Cluster{})) {
		sub := map[string]reflect.Type{"engine": reflect.TypeOf(Engine{}), "router": reflect.TypeOf(Router{}), "latency": reflect.TypeOf(Latency{}), "network": reflect.TypeOf(Network{})}
		if k == "deployments" {
			continue // the other form (examples/clusters/deployments.yaml)
		}
		if _, ok := lines[k]; !ok {
			t.Errorf("%s does not set %s", path, k)
		}
		if st, ok := sub[k]; ok {
			for _, kk := range yamlcheck.Keys(st) {
				if _, ok := lines[k+"."+kk]; !ok {
					t.Errorf("%s does not set %s.%s", path, k, kk)
				}
			}
		}
	}
}
