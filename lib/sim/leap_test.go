package sim_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/blis-sim/blis/lib/decision"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// Leaping (docs/engine.md, "Leaping") changes nothing a run writes: every
// table — results, decisions (with counterfactual regret), anomalies,
// scale events, steps — is the same byte for byte with and without it,
// over the features that read or change a replica in the middle of a span.
func TestLeapWritesTheSameTables(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		// a policy bundle file over the config (optional), or its text
		policy     string
		policyYAML string
		noScale    bool // no scale-events table (P/D pools cannot report them)
		trace      decision.Level
		regret     float64
		steps      bool
		held       bool // its replicas are held (replica.Hold): stepped either way
		cap        int  // the client's requests in flight (Run.MaxInFlight)
		rate       float64
	}{
		{name: "round-robin", yaml: "replicas: 6\n"},
		{name: "least-loaded with decisions and regret", yaml: "replicas: 6\nrouter: {routing: least-loaded}\n", trace: decision.Decisions, regret: 0.05},
		{name: "least-kv, snapshots", yaml: "replicas: 6\nrouter: {routing: least-kv}\nsnapshot_interval: 20ms\n", trace: decision.Decisions},
		{name: "weighted, sync scheduling", yaml: "replicas: 6\nengine: {async_scheduling: false}\nrouter: {routing: weighted}\n", trace: decision.Decisions},
		{name: "prefix-affinity, index", yaml: "replicas: 20\nengine: {kv_blocks: 600}\nrouter: {routing: prefix-affinity}\n", trace: decision.Decisions, regret: 0.05},
		{name: "timeouts and a horizon", yaml: "replicas: 4\nclient_timeout: 1500ms\nhorizon: 40s\nrouter: {routing: power-of-two}\n", trace: decision.Decisions},
		{name: "steps table (stepped either way)", yaml: "replicas: 3\n", steps: true, trace: decision.Full},
		{name: "policy bundle (decision tree reading KV)", yaml: "replicas: 6\n", policy: "weighted-tree.yaml", trace: decision.Decisions, regret: 0.05},
		{name: "policy bundle (Starlark)", yaml: "replicas: 6\n", policy: "prefix-load.yaml", trace: decision.Decisions},
		{name: "P/D", yaml: `
deployments:
  - id: pd
    model: llama-3.1-8b
    gpu: h100
    pools: [{role: prefill, replicas: 2}, {role: decode, replicas: 4}]
    kv_transfer: {bandwidth_gb_s: 50, latency: 20us, granularity: chunk, routing: decode-first}
router: {routing: least-loaded}
`, trace: decision.Decisions, noScale: true},
		{name: "KV tiers", yaml: `
deployments:
  - id: t
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 800}
    pools: [{role: monolithic, replicas: 4}]
    kv: {offload: lazy, tiers: [{name: cpu, capacity_blocks: 2000}]}
router: {routing: prefix-affinity}
`, trace: decision.Decisions},
		{name: "autoscaled", yaml: `
deployments:
  - id: a
    model: llama-3.1-8b
    gpu: h100
    pools:
      - role: monolithic
        replicas: 2
        max_replicas: 8
        autoscaler:
          policy: hpa
          interval: 5s
          metric: running
          target: 12
          provisioning: {dist: constant, value: 2s}
          warmup: {curve: linear, duration: 3s, initial_factor: 2}
          drain: {mode: redirect, timeout: 20s}
          stabilization: {down: 10s}
router: {routing: least-loaded}
`, trace: decision.Decisions},
		{name: "KV tiers, a tree reading offload and reload rates", yaml: `
deployments:
  - id: t
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 500}
    pools: [{role: monolithic, replicas: 4}]
    kv: {offload: eager, tiers: [{name: cpu, capacity_blocks: 1500}]}
`, policyYAML: `
id: tier-rates
generation: 0
routing:
  kind: decision_tree
  tree:
    score: "0.5 * replica.kv_lower_utilization - 0.001 * replica.kv_offload_rate - 0.002 * replica.kv_reload_rate - 0.01 * replica.outstanding + 0.3 * replica.cached_blocks / (request.prefix_blocks + 1)"
`, rate: 60, trace: decision.Decisions, held: true},
		{name: "prefix-affinity, KV events 50 ms late", yaml: "replicas: 20\nengine: {kv_blocks: 600}\nkv_event_delay: 50ms\nrouter: {routing: prefix-affinity}\n", trace: decision.Decisions, regret: 0.05},
		{name: "weighted, KV events 5 ms late, snapshots", yaml: "replicas: 8\nkv_event_delay: 5ms\nsnapshot_interval: 10ms\nrouter: {routing: weighted}\n", trace: decision.Decisions},
		{name: "speculative decoding (held: stepped either way)", yaml: "replicas: 4\nspeculative: {method: ngram, num_speculative_tokens: 3, acceptance_rate: 0.6}\n", trace: decision.Decisions, held: true},
		{name: "a routing policy holding requests at the router", yaml: "replicas: 4\n", policy: "hold.yaml", rate: 120, trace: decision.Decisions},
		{name: "client cap", yaml: "replicas: 6\nrouter: {routing: least-loaded}\n", cap: 24, rate: 400, trace: decision.Decisions},
		{name: "gateway flow control, utilization", yaml: `
replicas: 4
engine: {kv_blocks: 3000}
router:
  routing: least-kv
  flow_control: {saturation: {detector: utilization, queue_depth: 2, kv_cache: 0.3}, ttl: 20s}
`, rate: 120, trace: decision.Decisions},
		{name: "gateway flow control, concurrency", yaml: `
replicas: 4
router:
  routing: least-loaded
  flow_control: {saturation: {detector: concurrency, max_concurrency: 12}}
`, rate: 120, trace: decision.Decisions},
		{name: "MoE, DP4 with EP", yaml: `
deployments:
  - id: moe
    model: qwen3-30b-a3b
    gpu: h100
    parallel: {dp: 4, expert_parallel: true}
    pools: [{role: monolithic, replicas: 4}]
router: {routing: least-loaded}
`, trace: decision.Decisions},
		{name: "pipeline parallel", yaml: `
deployments:
  - id: pp
    model: llama-3.1-8b
    gpu: h100
    parallel: {pp: 2}
    pools: [{role: monolithic, replicas: 4}]
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse(tc.name+".yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var b *bundle.Bundle
			if tc.policy != "" {
				if b, err = bundle.Load("../../examples/policies/"+tc.policy, bundle.Env{}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.policyYAML != "" {
				if b, err = bundle.Parse(tc.name, []byte(tc.policyYAML), bundle.Env{}); err != nil {
					t.Fatal(err)
				}
			}
			rate := 40.0
			if tc.rate > 0 {
				rate = tc.rate
			}
			reqs := leapWorkload(1500, rate)
			var out [2]map[string][]byte
			var sum [2]engine.Summary
			for i, noLeap := range []bool{false, true} {
				s, err := sim.New(cfg, b)
				if err != nil {
					t.Fatal(err)
				}
				s.NoLeap = noLeap
				bufs := map[string]*bytes.Buffer{}
				o := func(name string) sim.Output {
					bufs[name] = &bytes.Buffer{}
					return sim.Output{Path: "-", W: bufs[name], Label: name}
				}
				r := &sim.Run{Source: engine.SliceSource(reqs), Path: "test", InputMeta: trace.NewMeta(),
					Stage:   trace.Stage{Tool: "test"},
					Results: o("results"), CheckInvariants: true, MaxInFlight: tc.cap}
				if !tc.noScale {
					r.ScaleEvents = o("scale-events")
				}
				if tc.trace > decision.Minimal {
					r.Decisions, r.Anomalies = o("decisions"), o("anomalies")
					slos, err := slo.Parse([]string{"ttft=300ms"})
					if err != nil {
						t.Fatal(err)
					}
					r.Trace = sim.Trace{Level: tc.trace, SLOs: slos,
						Regret: decision.RegretConfig{Sample: tc.regret, Seed: 7}}
				}
				if tc.steps {
					r.Steps = o("steps")
				}
				oc, err := s.Run(r)
				if err != nil {
					t.Fatal(err)
				}
				out[i] = map[string][]byte{}
				for k, v := range bufs {
					out[i][k] = v.Bytes()
				}
				sum[i] = oc.Summary
			}
			for k, v := range out[1] {
				if len(v) == 0 {
					t.Fatalf("%s: empty", k)
				}
				if !bytes.Equal(out[0][k], v) {
					t.Errorf("%s: %d bytes leaping, %d stepping, not the same", k, len(out[0][k]), len(v))
				}
			}
			t.Logf("%d steps: %d events in %d spans leaping, %d stepping", sum[1].Steps, sum[0].Events, sum[0].Spans, sum[1].Events)
			if sum[0].Steps != sum[1].Steps || sum[0].Completed != sum[1].Completed {
				t.Errorf("steps %d/%d, completed %d/%d leaping/stepping", sum[0].Steps, sum[1].Steps, sum[0].Completed, sum[1].Completed)
			}
			if tc.held && sum[0].Spans != 0 {
				t.Errorf("%d spans on held replicas", sum[0].Spans)
			}
			if !tc.steps && !tc.held && (sum[0].Spans == 0 || sum[0].Events >= sum[1].Events) {
				t.Errorf("%d spans, %d events leaping against %d stepping: the run did not leap", sum[0].Spans, sum[0].Events, sum[1].Events)
			}
		})
	}
}

// leapWorkload is n requests arriving at rate per second, with prompts of
// 32 shared system prompts and decodes of a few hundred tokens.
func leapWorkload(n int, rate float64) []row.Request {
	arr, lens := rng.New(3, "arrivals"), rng.New(3, "lengths")
	clamp := func(x float64) int32 { return int32(min(max(math.Round(x), 2), 3000)) }
	reqs := make([]row.Request, n)
	t := 0.0
	for i := range reqs {
		t += arr.ExpFloat64() / rate
		r := row.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS = int64(t * 1e6)
		r.InputTokens, r.OutputTokens = clamp(400+200*lens.NormFloat64()), clamp(300+200*lens.NormFloat64())
		sys := uint64(lens.IntN(32))
		for j := int32(0); j < r.InputTokens/16; j++ {
			h := sys<<40 | uint64(j)
			if j >= 12 {
				h = uint64(i+1)<<20 | uint64(j) | 1<<63
			}
			r.PrefixHashes = append(r.PrefixHashes, h)
		}
		reqs[i] = r
	}
	return reqs
}
