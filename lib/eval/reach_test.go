package eval

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/fitness"
)

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFitnessReach: every anomaly count, the rejection rate, scale-up and
// -down counts and oscillations, per-tier hit rates and cost are metrics a
// fitness spec can use as objectives and constraints, with the values the
// run's tables give.
func TestFitnessReach(t *testing.T) {
	dir := t.TempDir()
	const evolve = "../../examples/evolve/"
	// A tiered static cluster behind a queue limit (some rejections).
	cl := write(t, dir, "tiered.yaml", `
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    gpu_hour_usd: 2.5
    engine: {kv_blocks: 600}
    pools: [{role: monolithic, replicas: 2}]
    kv: {offload: lazy, tiers: [{name: cpu, capacity_blocks: 4000}]}
router: {admission: queue-limit, queue_limit: 40, routing: prefix-affinity}
`)
	spec, err := fitness.Parse([]byte(`
slo: ["interactive:ttft=300ms"]
objectives:
  - {metric: anomalies, direction: minimize, scale: 100}
  - {metric: cache_hit_rate_cpu, direction: maximize}
  - {metric: cost_usd, direction: minimize}
constraints:
  - "anomalies.slo_violation <= 100000"
  - "rejection_rate <= 0.9"
  - "scale_ups <= 0"
  - "scale_oscillations <= 0"
  - "cache_hit_rate_gpu >= 0"
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(Options{Cluster: cl, Fitness: spec, Workload: evolve + "workload.yaml", Seeds: 1, Artifacts: filepath.Join(dir, "a1")})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Valid {
		t.Fatalf("invalid: %s", out.Error)
	}
	m := out.Metrics
	counts, err := fitness.CountAnomalies(out.Artifacts["anomalies"])
	if err != nil {
		t.Fatal(err)
	}
	if float64(m["anomalies"]) != float64(counts[""]) || float64(m["anomalies.slo_violation"]) != float64(counts["slo_violation"]) || counts["slo_violation"] == 0 {
		t.Fatalf("anomaly metrics %v, %v against the table's %v", m["anomalies"], m["anomalies.slo_violation"], counts)
	}
	if r := float64(m["rejection_rate"]); !(r > 0 && r < 0.9) {
		t.Fatalf("rejection_rate %v: want some rejections", r)
	}
	gpu, cpu, sto, all := float64(m["cache_hit_rate_gpu"]), float64(m["cache_hit_rate_cpu"]), float64(m["cache_hit_rate_storage"]), float64(m["cache_hit_rate"])
	if !(cpu > 0) || math.Abs(gpu+cpu+sto-all) > 1e-9 {
		t.Fatalf("tier hit rates gpu %v + cpu %v + storage %v != %v", gpu, cpu, sto, all)
	}
	if m["scale_ups"] != 0 || m["scale_downs"] != 0 || m["scale_oscillations"] != 0 || !(m["cost_usd"] > 0) {
		t.Fatalf("static cluster: scale %v/%v/%v, cost %v", m["scale_ups"], m["scale_downs"], m["scale_oscillations"], m["cost_usd"])
	}
	for _, o := range out.Fitness.Objectives {
		if o.Metric == "anomalies" && float64(o.Value) != float64(counts[""]) {
			t.Fatalf("objective %+v", o)
		}
	}

	// An autoscaled pool that a bundle scales up, down and up again within
	// ten minutes: two scale-ups, a scale-down, one oscillation.
	as := write(t, dir, "scaled.yaml", `
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    gpu_hour_usd: 2.5
    engine: {kv_blocks: 2000}
    pools:
      - {role: monolithic, replicas: 1, min_replicas: 1, max_replicas: 3,
         autoscaler: {target: 4, interval: 1s, stabilization: {up: 0s, down: 0s}}}
`)
	b := write(t, dir, "b.yaml", `
autoscaler:
  kind: starlark
  source: |
    def scale(pool, cluster):
        t = pool.now_us // 1000000
        if t == 1 or t == 3:
            return pool.replicas + 1
        if t == 2:
            return pool.replicas - 1
        return pool.replicas
`)
	spec2, _ := fitness.Parse([]byte("objectives: [{metric: scale_oscillations, direction: minimize}]\nconstraints: [\"scale_ups >= 1\", \"scale_downs >= 1\"]\n"))
	out, err = Run(Options{Cluster: as, Policy: b, Fitness: spec2, Workload: evolve + "workload.yaml", Seeds: 1, Artifacts: filepath.Join(dir, "a2")})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Valid || out.Metrics["scale_ups"] != 2 || out.Metrics["scale_downs"] != 1 || out.Metrics["scale_oscillations"] != 1 {
		t.Fatalf("autoscaled: valid %v (%s), ups %v downs %v oscillations %v", out.Valid, out.Error, out.Metrics["scale_ups"], out.Metrics["scale_downs"], out.Metrics["scale_oscillations"])
	}
}

// TestNotesFixedReplications: replications of a fixed requests table on a
// deterministic cluster cannot vary: the JSON says so (zero-width CIs);
// regenerated workloads vary and get no note.
func TestNotesFixedReplications(t *testing.T) {
	dir := t.TempDir()
	const evolve = "../../examples/evolve/"
	spec, _ := fitness.Load(evolve + "fitness.yaml")
	cl := write(t, dir, "c.yaml", "replicas: 2\nmodel: llama-3.1-8b\ngpu: h100\nrouter: {routing: least-loaded}\n")
	out, err := Run(Options{Cluster: cl, Fitness: spec, Workload: evolve + "workload.yaml", Seeds: 2, Artifacts: filepath.Join(dir, "w")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Notes) != 0 {
		t.Fatalf("regenerated workloads: notes %q", out.Notes)
	}
	table := filepath.Join(dir, "w", "results-seed0.arrow") // a requests table: results start with the requests' columns
	out, err = Run(Options{Cluster: cl, Fitness: spec, Requests: table, Seeds: 3, Artifacts: filepath.Join(dir, "t")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Notes) != 1 || !strings.Contains(out.Notes[0], "the 3 replications gave identical metrics") || !strings.Contains(out.Notes[0], "the requests table is fixed") {
		t.Fatalf("fixed table: notes %q", out.Notes)
	}
	if ci := out.CI95["goodput"]; ci[0] != ci[1] {
		t.Fatalf("ci95 %v", ci)
	}
	// A random router on the same table varies: no note.
	cr := write(t, dir, "r.yaml", "replicas: 2\nmodel: llama-3.1-8b\ngpu: h100\nrouter: {routing: random}\n")
	out, err = Run(Options{Cluster: cr, Fitness: spec, Requests: table, Seeds: 3, Artifacts: filepath.Join(dir, "r")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Notes) != 0 {
		t.Fatalf("random router: notes %q", out.Notes)
	}
}

// TestAdviceDoesNotContradictTheBundle: a bundle that already schedules by
// priority (scheduling_policy: priority, its own priority stage) is not
// told to "use scheduling_policy: priority" when the requests' priority
// column is inverted by its stage; it is told what it does. (Under fcfs the
// queues keep their order and the detector finds no inversion; the advice
// for that case is lib/summary's TestAdviceFollowsTheRun.)
func TestAdviceDoesNotContradictTheBundle(t *testing.T) {
	dir := t.TempDir()
	wl := write(t, dir, "w.yaml", `
version: 1
seed: 3
num_requests: 600
aggregate_rate: 120
clients:
  - {name: hi, rate_fraction: 0.5, priority: 5, input: {dist: constant, value: 900}, output: {dist: constant, value: 200}, arrival: {process: poisson}}
  - {name: lo, rate_fraction: 0.5, priority: 0, input: {dist: constant, value: 900}, output: {dist: constant, value: 200}, arrival: {process: poisson}}
`)
	spec, _ := fitness.Parse([]byte("objectives: [{metric: ttft_p99, direction: minimize}]\n"))
	bundle := write(t, dir, "b.yaml", "id: inverted\npriority:\n  kind: decision_tree\n  tree: {priority: \"0 - request.priority\"}\n")
	for _, tc := range []struct {
		name, sched, policy, want, notWant string
	}{
		{"priority by the bundle", "priority", bundle, "the bundle's priority stage (decision_tree)", "set scheduling_policy"},
	} {
		cl := write(t, dir, tc.sched+".yaml", "replicas: 1\nmodel: llama-3.1-8b\ngpu: h100\nrouter: {priority: request}\nengine: {scheduling_policy: "+tc.sched+", max_num_seqs: 8, kv_blocks: 2000}\n")
		out, err := Run(Options{Cluster: cl, Policy: tc.policy, Fitness: spec, Workload: wl, Seeds: 1, Artifacts: filepath.Join(dir, tc.sched)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Metrics["anomalies.priority_inversion"] == 0 {
			t.Fatalf("%s: no priority inversion to advise on (anomalies %v)", tc.name, out.Metrics["anomalies"])
		}
		focus := out.Summary[strings.Index(out.Summary, "## Suggested focus"):]
		if !strings.Contains(focus, tc.want) || strings.Contains(focus, tc.notWant) {
			t.Fatalf("%s: %s\nwant %q, not %q", tc.name, focus, tc.want, tc.notWant)
		}
	}
}
