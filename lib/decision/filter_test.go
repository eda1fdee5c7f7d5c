package decision

import (
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/trace"
)

// TestFilteredCandidates: a routing policy that filters candidates out
// (a Starlark route's "filtered") has them, with their reasons, in its
// routing rows; untraced, the same run gives the same results.
func TestFilteredCandidates(t *testing.T) {
	b, err := bundle.Parse("b.yaml", []byte(`routing:
  kind: starlark
  source: |
    def route(request, cluster):
        best = None
        filtered = {}
        for r in cluster.replicas:
            if r.index % 2 == 1:
                filtered[r.id] = "odd replica (test)"
            elif best == None or r.outstanding < best.outstanding:
                best = r
        return {"target": best.id, "filtered": filtered}
`), bundle.Env{})
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig(4, "round-robin")
	reqs := workload(5, 100)
	run := func(dc *Config) *results {
		rt, err := b.Instantiate(&c)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := simulateWith(t, c, reqs, dc, rt.Policies())
		return res
	}
	ds := &decisions{}
	traced := run(&Config{Level: Decisions, Decisions: ds})
	plain := run(nil)
	if len(plain.rs) != len(traced.rs) {
		t.Fatal("tracing changed the results")
	}
	n := 0
	for _, d := range ds.ds {
		if d.Kind != trace.DecisionRouting {
			continue
		}
		n++
		if len(d.Filtered) != 2 || d.Filtered[0].ReplicaID != "llama-3.1-8b/1" || d.Filtered[1].ReplicaID != "llama-3.1-8b/3" ||
			!strings.Contains(d.Filtered[0].Reason, "odd replica") || strings.HasSuffix(d.Target, "/1") || strings.HasSuffix(d.Target, "/3") {
			t.Fatalf("seq %d: target %s, filtered %+v", d.Seq, d.Target, d.Filtered)
		}
	}
	if n != len(reqs) {
		t.Fatalf("%d routing rows for %d requests", n, len(reqs))
	}
	// Choosing a filtered candidate is an error naming the policy.
	bad, err := bundle.Parse("b.yaml", []byte("routing:\n  kind: starlark\n  source: |\n    def route(request, cluster):\n        r = cluster.replicas[0].id\n        return {\"target\": r, \"filtered\": [r]}\n"), bundle.Env{})
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := bad.Instantiate(&c)
	models, _, _ := engine.Prepare(&c)
	_, err = engine.Run(c, models, engine.SliceSource(reqs), &results{}, engine.Options{Policies: rt.Policies()})
	if err == nil || !strings.Contains(err.Error(), "a filtered candidate cannot be chosen") {
		t.Fatalf("target filtered: got %v", err)
	}
}
