package engine

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/autoscale"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// scaled is an autoscaled pool of a linear-latency deployment; %s is the
// autoscaler's extra keys.
const scaled = `
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 2000}
    latency: {mode: linear, beta: [1000, 1, 10]}
    pools:
      - role: monolithic
        replicas: %d
        min_replicas: %d
        max_replicas: %d
        autoscaler: {%s}
router: {routing: %s}
`

func scaledConfig(t *testing.T, replicas, lo, hi int, routing, keys string) (config.Cluster, []latency.Model) {
	t.Helper()
	return parse(t, fmt.Sprintf(scaled, replicas, lo, hi, keys, routing))
}

// stepLoad is rate1 req/s until t1 (s), then rate2 until t2.
func stepLoad(rate1, t1, rate2, t2 float64, in, out int32) []row.Request {
	var reqs []row.Request
	n := 0
	for t := 0.0; t < t2-1e-9; {
		reqs = append(reqs, req(fmt.Sprint("r", n), int64(t*1e6+0.5), in, out))
		n++
		if t < t1-1e-9 {
			t = float64(n) / rate1
			if t >= t1 {
				t = t1
			}
		} else {
			t += 1 / rate2
		}
	}
	return reqs
}

func runScaled(t *testing.T, c config.Cluster, models []latency.Model, reqs []row.Request) (*memSink, Summary, []row.ScaleEvent) {
	t.Helper()
	sink := &memSink{}
	var rows []row.ScaleEvent
	opts := Options{CheckInvariants: true, ScaleEventsTo: func(r []row.ScaleEvent) { rows = r }}
	sum, err := Run(c, models, SliceSource(reqs), sink, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sink, sum, rows
}

// A step from 2 to 20 req/s at 100 s. hpa on request_rate, target 5 per
// replica, evaluated every 10 s over a 10 s window: the evaluation at 110 s
// is the first to see 20 req/s and recommends ceil(1 × 20/5) = 4, but the
// scale-up stabilisation window of 30 s holds the count at the lowest
// recommendation of (80 s, 110 s], which includes 1 from 90 s and 100 s;
// at 130 s every recommendation of (100 s, 130 s] is 4, and the pool goes
// from 1 to 4. The new replicas serve exactly provisioning (60 s) + weight
// load (16 GB at 2 GB/s = 8 s) later: 198 s.
func TestHPAStepLoadExact(t *testing.T) {
	c, models := scaledConfig(t, 1, 1, 8, "least-loaded", `policy: hpa, interval: 10s, metric: request_rate, target: 5,
          stabilization: {up: 30s, down: 300s}, provisioning: {dist: constant, value: 60s},
          weight_load: {bytes: 16e9, bandwidth_gb_s: 2}`)
	reqs := stepLoad(2, 100, 20, 220, 10, 5)
	sink, sum, rows := runScaled(t, c, models, reqs)
	if sum.Completed != int64(len(reqs)) {
		t.Fatalf("completed %d of %d", sum.Completed, len(reqs))
	}
	var up *row.ScaleEvent
	firstServing := int64(-1)
	for i := range rows {
		r := &rows[i]
		if r.Action == row.ScaleUp && up == nil {
			up = r
		}
		if r.Action == row.ScaleServing && firstServing < 0 {
			firstServing = r.TimeUS
		}
	}
	if up == nil {
		t.Fatalf("no scale-up: %+v", rows)
	}
	if up.TimeUS != 130e6 || up.From != 1 || up.To != 4 {
		t.Fatalf("scale-up at %d µs from %d to %d, want 130 s from 1 to 4 (%s)", up.TimeUS, up.From, up.To, up.Reason)
	}
	if up.ProvisioningUS != 68e6 || up.WarmEndUS != 198e6 {
		t.Fatalf("provisioning %d µs, warm at %d µs; want 68 s and 198 s", up.ProvisioningUS, up.WarmEndUS)
	}
	if firstServing != 198e6 {
		t.Fatalf("first new replica serving at %d µs, want 198 s", firstServing)
	}
	if up.RequestRate != 20 {
		t.Fatalf("rate seen %g, want 20", up.RequestRate)
	}
	// No request reached a new replica before it served.
	for _, r := range sink.rs {
		if r.ReplicaID != "d/0" && r.RoutedUS < 198e6 {
			t.Fatalf("%s routed to %s at %d µs, before it served", r.ID, r.ReplicaID, r.RoutedUS)
		}
	}
}

// phased is a workload whose rate changes by phases (req/s for seconds),
// with shared prompt prefixes and follow-up turns, for autoscaling tests.
func phased(seed uint64) []row.Request {
	g := rng.New(seed, "test-phased")
	phases := []struct{ rate, secs float64 }{{4, 20}, {60, 30}, {3, 40}, {60, 20}, {1, 30}}
	var reqs []row.Request
	t0 := 0.0
	i := 0
	for _, p := range phases {
		for t := t0 + g.ExpFloat64()/p.rate; t < t0+p.secs; t += g.ExpFloat64() / p.rate {
			in := int32(50 + g.IntN(300))
			r := req(fmt.Sprint("p", i), int64(t*1e6), in, int32(10+g.IntN(120)))
			grp := uint64(g.IntN(4))
			for j := int32(0); j < in/16; j++ {
				h := grp*1000 + uint64(j)
				if j > 3 {
					h += uint64(i) * 1_000_000
				}
				r.PrefixHashes = append(r.PrefixHashes, h)
			}
			reqs = append(reqs, r)
			if g.IntN(4) == 0 {
				next := row.NewRequest(fmt.Sprint("p", i, "-next"))
				next.InputTokens, next.OutputTokens = in+60, int32(5+g.IntN(40))
				next.DependsOn, next.DelayUS = []string{r.ID}, int64(g.IntN(2_000_000))
				next.PrefixHashes = r.PrefixHashes
				reqs = append(reqs, next)
			}
			i++
		}
		t0 += p.secs
	}
	return reqs
}

const phasedKeys = `policy: %s, interval: 2s, sample: 500ms, window: 4s, metric: queue_depth, target: %s, low: %s,
          slo: {ttft: 300ms}, stabilization: {up: 0s, down: 6s},
          provisioning: {dist: uniform, min: 1s, max: 3s}, weight_load: {time: 1s},
          warmup: {curve: linear, duration: 3s, initial_factor: 2}, drain: {mode: %s, timeout: 20s},
          triggers: {queue_depth_above: 30}`

const phasedCluster = `
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 3000, max_num_seqs: 32}
    latency: {mode: linear, beta: [5000, 20, 100]}
    pools:
      - role: monolithic
        replicas: 1
        min_replicas: %d
        max_replicas: 6
        autoscaler: {%s}
router: {routing: %s}
`

func phasedConfig(t *testing.T, pol, drain, routing string, lo int) (config.Cluster, []latency.Model) {
	t.Helper()
	target, low := "4", "1"
	if pol == "slo" {
		target, low = "0.9", "0.5"
	}
	keys := fmt.Sprintf(phasedKeys, pol, target, low, drain)
	if lo == 0 {
		keys += ", scale_to_zero: true"
	}
	return parse(t, fmt.Sprintf(phasedCluster, lo, keys, routing))
}

// Every policy, drain mode and router, with --check-invariants (pool
// bounds, no step on a replica that is not ready, no replica stopping with
// work, request conservation): requests are lost only to an immediate
// drain, each counted; the pools really scale up and down.
func TestAutoscaleInvariants(t *testing.T) {
	reqs := phased(3)
	for _, pol := range []string{"hpa", "queue-threshold", "slo"} {
		for _, drain := range []string{"immediate", "wait", "redirect"} {
			for _, routing := range []string{"least-loaded", "prefix-affinity", "round-robin"} {
				t.Run(pol+"/"+drain+"/"+routing, func(t *testing.T) {
					c, models := phasedConfig(t, pol, drain, routing, 1)
					sink, sum, rows := runScaled(t, c, models, reqs)
					ups, downs := 0, 0
					for _, r := range rows {
						switch r.Action {
						case row.ScaleUp:
							ups++
						case row.ScaleDown:
							downs++
						}
						if r.Replicas < 1 || r.Ready > r.Replicas {
							t.Fatalf("row %+v: replicas out of bounds", r)
						}
					}
					if ups == 0 || downs == 0 {
						t.Fatalf("%d ups and %d downs: the test load should scale both ways", ups, downs)
					}
					lost := 0
					for _, r := range sink.rs {
						if r.Status == row.StatusDropped && strings.Contains(r.DropReason, "replica ") {
							lost++
						} else if r.Status != row.StatusCompleted && !strings.HasPrefix(r.DropReason, "dependency ") {
							t.Fatalf("%s: %s %q", r.ID, r.Status, r.DropReason)
						}
					}
					if int64(lost) != sum.DrainDropped {
						t.Fatalf("%d requests dropped by drains, summary counts %d", lost, sum.DrainDropped)
					}
					if drain != "immediate" && lost != 0 {
						t.Fatalf("%s drain lost %d requests", drain, lost)
					}
					t.Logf("%d requests: %d up, %d down, %d lost, %d redirected, %d held; GPU-hours %.3f", len(reqs), ups, downs, lost, sum.Redirected, sum.HeldAtRouter, sum.GPUHours[0])
				})
			}
		}
	}
}

// Same inputs, same outputs: twice, streamed, with and without the
// router's indexes, and a fork taken mid-run continues identically.
func TestAutoscaleDeterminism(t *testing.T) {
	reqs := phased(5)
	for _, drain := range []string{"immediate", "redirect"} {
		c, models := phasedConfig(t, "hpa", drain, "prefix-affinity", 0)
		out := func(src Source, opts Options) ([]byte, string) {
			var buf bytes.Buffer
			schema := trace.ResultsSchema(trace.NewMeta())
			o, err := trace.Create("-", &buf, schema)
			if err != nil {
				t.Fatal(err)
			}
			w := trace.NewResultWriter(o, schema)
			var rows []row.ScaleEvent
			opts.CheckInvariants = true
			opts.ScaleEventsTo = func(r []row.ScaleEvent) { rows = r }
			if _, err := Run(c, models, src, w, opts); err != nil {
				t.Fatal(err)
			}
			w.Close()
			return buf.Bytes(), fmt.Sprintf("%+v", rows)
		}
		a, ra := out(SliceSource(reqs), Options{})
		b, rb := out(SliceSource(reqs), Options{})
		s, rs := out(&chunkSource{reqs: reqs, n: 5}, Options{})
		i1, ri1 := out(SliceSource(reqs), Options{RouterIndexes: 1})
		i0, ri0 := out(SliceSource(reqs), Options{RouterIndexes: -1})
		// The load tree too (least-loaded reads it when it is kept).
		cl, ml := phasedConfig(t, "hpa", drain, "least-loaded", 1)
		c, models = cl, ml
		l1, rl1 := out(SliceSource(reqs), Options{RouterIndexes: 1})
		l0, rl0 := out(SliceSource(reqs), Options{RouterIndexes: -1})
		c, models = phasedConfig(t, "hpa", drain, "prefix-affinity", 0)
		if !bytes.Equal(l1, l0) || rl1 != rl0 {
			t.Fatal("least-loaded runs with and without the load tree differ")
		}
		if !bytes.Equal(a, b) || ra != rb {
			t.Fatal("two runs differ")
		}
		if !bytes.Equal(a, s) || ra != rs {
			t.Fatal("streamed run differs")
		}
		if !bytes.Equal(i1, i0) || ri1 != ri0 {
			t.Fatal("runs with and without the router's indexes differ")
		}
		// Forks.
		straight := &memSink{}
		if _, err := Run(c, models, SliceSource(reqs), straight, Options{CheckInvariants: true}); err != nil {
			t.Fatal(err)
		}
		for _, at := range []int64{25e6, 60e6, 100e6} {
			orig := &memSink{}
			cl, err := cluster.New(&c, models, orig, Options{CheckInvariants: true})
			if err != nil {
				t.Fatal(err)
			}
			f := &feeder{c: cl, lastRoot: math.MinInt64}
			if err := f.preloadAll(&sliceSource{reqs: reqs}); err != nil {
				t.Fatal(err)
			}
			checkFork(t, cl, f, orig, straight, at)
		}
	}
}

// A pool at zero replicas: a request arriving at 1 s waits at the router;
// hpa's evaluation at 2 s sees it pending and starts one replica, serving
// 5 s (provisioning) + 1 s (weight load) later, at 8 s, when the request
// is routed. Its wait is in its latency: TTFT = 7 s + one step.
func TestScaleFromZeroHoldsAtRouter(t *testing.T) {
	c, models := scaledConfig(t, 0, 0, 2, "least-loaded", `policy: hpa, interval: 2s, target: 4,
          provisioning: {dist: constant, value: 5s}, weight_load: {time: 1s}, scale_to_zero: true`)
	reqs := []row.Request{req("a", 1e6, 100, 1)}
	sink, sum, rows := runScaled(t, c, models, reqs)
	r := sink.byID()["a"]
	step := int64(1000 + 100) // β0 + β1·100
	if r.Status != row.StatusCompleted || r.RoutedUS != 8e6 || r.TTFTUS != 7e6+step {
		t.Fatalf("a: %s routed at %d µs, TTFT %d µs; want completed, routed at 8 s, TTFT 7 s + %d µs", r.Status, r.RoutedUS, r.TTFTUS, step)
	}
	if sum.HeldAtRouter != 1 || sum.HeldUS != 7e6 {
		t.Fatalf("held %d for %d µs, want 1 for 7 s", sum.HeldAtRouter, sum.HeldUS)
	}
	if rows[1].Action != row.ScaleUp || rows[1].TimeUS != 2e6 || rows[1].Pending != 1 {
		t.Fatalf("second row %+v, want the scale-up at 2 s with 1 pending", rows[1])
	}
}

// A warming replica's steps are slower by the curve's factor at their
// start: linear from 3 to 1 over 10 s, a step starting 5 s into the warm-up
// takes twice its time.
func TestWarmupSlowsSteps(t *testing.T) {
	c, models := scaledConfig(t, 0, 0, 1, "least-loaded", `policy: hpa, interval: 1s, target: 4,
          weight_load: {time: 1s}, warmup: {curve: linear, duration: 10s, initial_factor: 3}, scale_to_zero: true`)
	// The replica starts at 1 s (the first evaluation), is ready at 2 s and
	// warm at 12 s; b arrives at 7 s, 5 s into the warm-up.
	reqs := []row.Request{req("a", 500e3, 100, 1), req("b", 7e6, 100, 1)}
	sink, _, _ := runScaled(t, c, models, reqs)
	b := sink.byID()["b"]
	if want := int64(2 * (1000 + 100)); b.TTFTUS != want {
		t.Fatalf("b TTFT %d µs, want %d (factor 2)", b.TTFTUS, want)
	}
}

func TestAutoscalerConfigErrors(t *testing.T) {
	pool := func(bounds, keys string) string {
		return fmt.Sprintf(`deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    pools:
      - {role: monolithic, %s,
         autoscaler: {%s}}
`, bounds, keys)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"min above max", pool("replicas: 2, min_replicas: 4, max_replicas: 3", "target: 4"), "c.yaml:6: deployments[0].pools[0].min_replicas: expected <= max_replicas (3), found 4"},
		{"interval 0", pool("replicas: 1, max_replicas: 3", "target: 4, interval: 0s"), "deployments[0].pools[0].autoscaler.interval: expected a duration > 0, found 0s"},
		{"target 0", pool("replicas: 1, max_replicas: 3", "target: 0"), "deployments[0].pools[0].autoscaler.target: expected a number > 0, found 0"},
		{"no target", pool("replicas: 1, max_replicas: 3", "policy: hpa"), "autoscaler.target: expected a number > 0, found 0"},
		{"negative delay", pool("replicas: 1, max_replicas: 3", "target: 4, provisioning: {dist: constant, value: -5s}"), `c.yaml:7: deployments[0].pools[0].autoscaler.provisioning.value: expected a non-negative duration, found "-5s"`},
		{"negative timeout", pool("replicas: 1, max_replicas: 3", "target: 4, drain: {mode: wait, timeout: -1s}"), "autoscaler.drain.timeout: expected a non-negative duration"},
		{"unknown policy", pool("replicas: 1, max_replicas: 3", "target: 4, policy: hpaa"), "autoscaler.policy: did you mean hpa?"},
		{"unknown key", pool("replicas: 1, max_replicas: 3", "target: 4, intervall: 5s"), "autoscaler.intervall: unknown key; did you mean interval?"},
		{"unknown metric", pool("replicas: 1, max_replicas: 3", "target: 4, metric: queue_deph"), "autoscaler.metric: did you mean queue_depth?"},
		{"bad dist", pool("replicas: 1, max_replicas: 3", "target: 4, provisioning: {dist: gamma}"), "autoscaler.provisioning.dist: expected constant, uniform, normal or lognormal"},
		{"uniform reversed", pool("replicas: 1, max_replicas: 3", "target: 4, provisioning: {dist: uniform, min: 5s, max: 1s}"), "autoscaler.provisioning.max: expected >= min (5s)"},
		{"bad curve", pool("replicas: 1, max_replicas: 3", "target: 4, warmup: {curve: cubic}"), "autoscaler.warmup.curve: expected linear, exponential or step"},
		{"factor below 1", pool("replicas: 1, max_replicas: 3", "target: 4, warmup: {initial_factor: 0.5}"), "autoscaler.warmup.initial_factor: expected a step-time factor in [1, 100]"},
		{"bad drain", pool("replicas: 1, max_replicas: 3", "target: 4, drain: {mode: kill}"), "autoscaler.drain.mode: expected immediate, wait or redirect"},
		{"bad bandwidth", pool("replicas: 1, max_replicas: 3", "target: 4, weight_load: {bandwidth_gb_s: 0}"), "autoscaler.weight_load.bandwidth_gb_s: expected a number > 0"},
		{"slo without slo", pool("replicas: 1, max_replicas: 3", "policy: slo, target: 0.9"), "autoscaler.slo: the slo policy needs slo.ttft, slo.e2e or slo.itl"},
		{"utilisation above 1", pool("replicas: 1, max_replicas: 3", "metric: utilization, target: 80"), "autoscaler.target: expected a fraction in (0, 1] for utilization"},
		{"zero start no max", pool("replicas: 0", "target: 4"), "deployments[0].pools[0].max_replicas: expected >= 1 for a pool starting at 0 replicas"},
		{"negative trigger", pool("replicas: 1, max_replicas: 3", "target: 4, triggers: {queue_depth_above: -1}"), "autoscaler.triggers.queue_depth_above: expected a number >= 0"},
		{"sample above interval", pool("replicas: 1, max_replicas: 3", "target: 4, interval: 1s, sample: 2s"), "autoscaler.sample: expected <= interval (1s), found 2s"},
		{"negative price", "deployments:\n  - {id: d, model: llama-3.1-8b, gpu: h100, gpu_hour_usd: -1, pools: [{replicas: 1}]}\n", "deployments[0].gpu_hour_usd: expected a price >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("c.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// fixedPolicy is a user policy (what a policy bundle's autoscaler stage
// plugs in): it asks for a count by time, and sees every pool.
type fixedPolicy struct{ seen int }

func (p *fixedPolicy) Recommend(v *autoscale.PoolView, all []autoscale.PoolView) autoscale.Recommendation {
	p.seen = len(all)
	if v.NowUS >= 20e6 {
		return autoscale.Recommendation{Desired: 99, Reason: "fixed: many"}
	}
	return autoscale.Recommendation{Desired: 2, Reason: "fixed: two"}
}

func TestUserAutoscalePolicy(t *testing.T) {
	c, models := scaledConfig(t, 1, 1, 3, "least-loaded", `target: 4, interval: 10s`)
	p := &fixedPolicy{}
	var rows []row.ScaleEvent
	opts := Options{CheckInvariants: true, ScaleEventsTo: func(r []row.ScaleEvent) { rows = r },
		Policies: cluster.Policies{Autoscale: func(dep string, pool int) autoscale.Policy {
			if dep == "d" && pool == 0 {
				return p
			}
			return nil
		}}}
	if _, err := Run(c, models, SliceSource(stepLoad(1, 40, 1, 40, 10, 2)), &memSink{}, opts); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		if r.Action == row.ScaleUp || r.Action == row.ScaleDown {
			got = append(got, fmt.Sprintf("%d:%d→%d:%s", r.TimeUS/1e6, r.From, r.To, r.Reason))
		}
	}
	want := []string{"10:1→2:fixed: two", "20:2→3:fixed: many; capped at max_replicas 3"}
	if !reflect.DeepEqual(got, want) || p.seen != 1 {
		t.Fatalf("decisions %q (policy saw %d pools), want %q", got, p.seen, want)
	}
}
