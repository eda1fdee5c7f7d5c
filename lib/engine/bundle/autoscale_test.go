package bundle_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
)

const scaledCluster = `
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 2000}
    latency: {mode: linear, beta: [1000, 1, 10]}
    pools:
      - {role: monolithic, replicas: 1, min_replicas: 1, max_replicas: 3,
         autoscaler: {target: 4, interval: 10s, weight_load: {time: 1s}}}
`

// A bundle's autoscaler stage drives an autoscaled pool: Starlark's
// scale(pool, cluster) answers 2 before 20 s and max_replicas after; the
// engine applies it at each 10 s evaluation (bounds and stabilisation are
// the engine's). A failing stage stops the run with its error.
func TestBundleAutoscalerDrivesPool(t *testing.T) {
	var reqs []row.Request
	for i := 0; i < 80; i++ {
		r := row.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i)*500_000, 50, 5
		reqs = append(reqs, r)
	}
	run := func(star string) ([]string, error) {
		cfg, err := config.Parse("c.yaml", []byte(scaledCluster))
		if err != nil {
			t.Fatal(err)
		}
		models, _, err := engine.Prepare(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bundle.Load(writeBundle(t, map[string]string{"b.yaml": "autoscaler: {kind: starlark, file: s.star}\n", "s.star": star}), bundle.Env{})
		if err != nil {
			t.Fatal(err)
		}
		var rows []row.ScaleEvent
		opts := engine.Options{CheckInvariants: true, ScaleEventsTo: func(r []row.ScaleEvent) { rows = r }}
		rt, err := b.Instantiate(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		opts.Policies = rt.Policies()
		_, err = engine.Run(cfg, models, engine.SliceSource(reqs), &memSink{}, opts)
		var got []string
		for _, r := range rows {
			if r.Action == row.ScaleUp || r.Action == row.ScaleDown {
				got = append(got, fmt.Sprintf("%d:%d→%d:%s", r.TimeUS/1e6, r.From, r.To, r.Reason))
			}
		}
		return got, err
	}
	got, err := run("def scale(pool, cluster):\n    if pool.now_us >= 20000000:\n        return (pool.max_replicas, 'peak')\n    return (2, 'two')\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10:1→2:bundle two", "20:2→3:bundle peak"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions %q, want %q", got, want)
	}
	if _, err := run("def scale(pool, cluster):\n    return pool.replicas // 0\n"); err == nil || !strings.Contains(err.Error(), "s.star") {
		t.Fatalf("a failing autoscaler stage: %v, want its error", err)
	}
}

// TestPoolViewFields: an autoscaler stage reads the pool's window metrics
// (the same the built-in policies use): rate, SLO attainment, latency
// percentiles, utilisation, time since the last scale, replicas
// provisioning, pending requests. The stage here records them in its
// state at each evaluation; the values are checked against the workload.
func TestPoolViewFields(t *testing.T) {
	var reqs []row.Request
	for i := 0; i < 200; i++ {
		r := row.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i)*100_000, 50, 5 // 10 req/s
		reqs = append(reqs, r)
	}
	cfg, err := config.Parse("c.yaml", []byte(scaledCluster))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Deployments[0].Pools[0].Autoscaler.SLO.TTFT = config.Duration(1e9) // 1 s: every request meets it
	star := `
def scale(pool, cluster):
    state.setdefault("seen", []).append([pool.now_us, pool.request_rate, pool.slo_attainment, pool.ttft_p50_us,
        pool.ttft_p99_us, pool.e2e_p99_us, pool.utilization, pool.since_last_scale_us, pool.provisioning,
        pool.pending, pool.window_us, pool.queue_per_replica])
    if pool.now_us == 10000000:
        return 2
    return pool.replicas
`
	st := runStar(t, cfg, reqs, "autoscaler", star)
	// At 10 s: 10 req/s over the 10 s window, every request met the 1 s
	// TTFT, none scaled before; the scale-up to 2 then provisions for the
	// 1 s weight load, so at 20 s the new replica is serving and the last
	// scale was 10 s ago.
	for _, want := range []string{"[10000000, 10.0, 1.0, ", ", -1, 0, 0, 10000000, ", "[20000000, 10.0, 1.0, ", ", 10000000, 0, 0, 10000000, "} {
		if !strings.Contains(st, want) {
			t.Fatalf("state %s\nlacks %q", st, want)
		}
	}
}
