package decision

import (
	"reflect"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/trace"
)

// TestHoldRows: a routing policy that holds requests at the router (a
// wait) has a routing row with action wait for every hold, written when
// decided, with the wait as value, the policy's reason and what it saw;
// every request still gets one routing row with action route; tracing
// and regret forks taken while requests are held change no result.
func TestHoldRows(t *testing.T) {
	b, err := bundle.Parse("b.yaml", []byte(`routing:
  kind: starlark
  source: |
    def route(request, cluster):
        best = None
        for r in cluster.replicas:
            if best == None or r.outstanding < best.outstanding:
                best = r
        if best.queue_depth + best.in_flight >= 2:
            return {"wait": 20000, "reason": "queues busy, %d held" % cluster.held, "scores": {r.id: -r.outstanding for r in cluster.replicas}}
        return best.id
`), bundle.Env{})
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig(3, "round-robin")
	c.Engine.MaxNumSeqs = 4
	reqs := workload(7, 300)
	run := func(dc *Config) (*results, *Recorder) {
		rt, err := b.Instantiate(&c)
		if err != nil {
			t.Fatal(err)
		}
		return simulateWith(t, c, reqs, dc, rt.Policies())
	}
	ds := &decisions{}
	traced, rec := run(&Config{Level: Decisions, Decisions: ds, Regret: RegretConfig{Sample: 0.2, Seed: 3}})
	plain, _ := run(nil)
	if !reflect.DeepEqual(plain.rs, traced.rs) {
		t.Fatal("tracing (with regret forks) changed the results")
	}
	routes, waits := map[string]int{}, 0
	held := map[string]bool{}
	for _, d := range ds.ds {
		if d.Kind != trace.DecisionRouting {
			continue
		}
		switch d.Action {
		case "route":
			routes[d.RequestID]++
			if held[d.RequestID] && d.TimeUS <= 0 {
				t.Fatalf("%s routed at %d after a hold", d.RequestID, d.TimeUS)
			}
		case "wait":
			waits++
			held[d.RequestID] = true
			if routes[d.RequestID] > 0 {
				t.Fatalf("%s held after it was routed", d.RequestID)
			}
			if d.Value != 20000 || !strings.HasPrefix(d.Reason, "queues busy") || d.Target != "" || len(d.Candidates) != 3 ||
				d.Waiting == trace.NullI32 || d.TTFTUS != trace.Null {
				t.Fatalf("wait row: %+v", d)
			}
		default:
			t.Fatalf("routing row with action %q", d.Action)
		}
	}
	if waits == 0 || len(held) == 0 {
		t.Fatal("the policy never held a request: the test needs a busier workload")
	}
	if int64(waits) != rec.Stats().Held {
		t.Fatalf("%d wait rows, Stats.Held %d", waits, rec.Stats().Held)
	}
	for _, r := range traced.rs {
		if r.Status == trace.StatusCompleted && routes[r.ID] != 1 {
			t.Fatalf("%s completed with %d route rows", r.ID, routes[r.ID])
		}
		if held[r.ID] && r.Status == trace.StatusCompleted && r.RoutedUS < r.AdmittedUS+20000 {
			t.Fatalf("%s held, yet routed at %d, admitted at %d", r.ID, r.RoutedUS, r.AdmittedUS)
		}
	}
	t.Logf("%d holds of %d requests", waits, len(held))
}
