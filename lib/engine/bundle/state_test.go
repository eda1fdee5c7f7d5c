package bundle

import (
	"testing"

	"github.com/blis-sim/blis/lib/engine/row"
)

// TestTracker checks the router state against hand-computed values, live
// and with a snapshot interval.
func TestTracker(t *testing.T) {
	tr := NewTracker(0)
	// Tenant a: 6 arrivals in second 0 (one delayed and coming back), 2 in second 3.
	for i, at := range []int64{0, 100, 200, 300, 400, 900_000} {
		id := string(rune('p' + i))
		tr.arrived(id, "a", at)
		tr.decided(id, "a", i != 2, i == 2)
	}
	tr.arrived("r", "a", 950_000) // the delayed request comes back: not a new arrival
	tr.decided("r", "a", true, false)
	ts := tr.tenant("a", 950_000)
	if ts.count != 6 || ts.active != 6 || ts.rate != 0.6 || !ts.burst {
		t.Fatalf("second 0: %+v, want count 6, active 6, rate 0.6/s, burst", *ts)
	}
	res := row.NewResult(row.NewRequest("p"))
	res.TenantID, res.Status, res.AdmittedUS, res.FinishedUS = "a", row.StatusCompleted, 0, 2_500_000
	res.ReplicaID, res.TTFTUS, res.InputTokens, res.CachedTokens, res.TPOTUS = "d/0", 1000, 100, 25, 50
	res.EnqueuedUS, res.FirstScheduledUS = 10, 410
	tr.finished(&res)
	tr.arrived("x", "a", 3_000_000)
	tr.decided("x", "a", true, false)
	ts = tr.tenant("a", 3_000_000)
	if ts.count != 7 || ts.active != 6 || ts.rate != 0.7 || ts.burst {
		t.Fatalf("second 3: %+v, want count 7, active 6, rate 0.7/s, no burst", *ts)
	}
	g := tr.global(3_000_000)
	if g.count != 7 || g.active != 6 || g.completed != 1 || g.throughput != 0.1 || g.rate != 0.7 {
		t.Fatalf("global: %+v", *g)
	}
	rs := tr.replica("d/0", 3_000_000)
	if rs.ttft != 1000 || rs.hit != 0.25 || rs.tpot != 50 || rs.wait != 400 {
		t.Fatalf("replica: %+v", *rs)
	}
	// Ten seconds later the window is empty.
	if ts = tr.tenant("a", 13_500_000); ts.rate != 0 {
		t.Fatalf("after 10 s: rate %g", ts.rate)
	}

	// With a 1 s snapshot interval, a decision sees the state as of the
	// last boundary.
	tr = NewTracker(1_000_000)
	tr.arrived("p", "a", 100)
	tr.decided("p", "a", true, false)
	if ts = tr.tenant("a", 500); ts.count != 0 {
		t.Fatalf("before the first boundary: count %d, want 0", ts.count)
	}
	tr.arrived("q", "a", 1_200_000) // publishes the state at 1 s (count 1), then counts q
	tr.decided("q", "a", true, false)
	if ts = tr.tenant("a", 1_300_000); ts.count != 1 || ts.active != 1 {
		t.Fatalf("after the boundary: %+v, want count 1", *ts)
	}
	if ts = tr.tenant("a", 2_000_000); ts.count != 2 {
		t.Fatalf("at the next boundary: count %d, want 2", ts.count)
	}
}
