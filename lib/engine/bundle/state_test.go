package bundle

import (
	"math"
	"strconv"
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
	// Less than a second since the first arrival: the rate is over 1 s.
	ts := tr.tenant("a", 950_000)
	if ts.count != 6 || ts.active != 6 || ts.rate != 6 || ts.burst {
		t.Fatalf("second 0: %+v, want count 6, active 6, rate 6/s, no burst", *ts)
	}
	res := row.NewResult(row.NewRequest("p"))
	res.TenantID, res.Status, res.AdmittedUS, res.FinishedUS = "a", row.StatusCompleted, 0, 2_500_000
	res.ReplicaID, res.TTFTUS, res.InputTokens, res.CachedTokens, res.TPOTUS = "d/0", 1000, 100, 25, 50
	res.EnqueuedUS, res.FirstScheduledUS = 10, 410
	tr.finished(&res)
	tr.arrived("x", "a", 3_000_000)
	tr.decided("x", "a", true, false)
	// 7 arrivals in the 3 s since the first.
	ts = tr.tenant("a", 3_000_000)
	if ts.count != 7 || ts.active != 6 || math.Abs(ts.rate-7.0/3) > 1e-12 || ts.burst {
		t.Fatalf("second 3: %+v, want count 7, active 6, rate 7/3 per s, no burst", *ts)
	}
	g := tr.global(3_000_000)
	if g.count != 7 || g.active != 6 || g.completed != 1 || math.Abs(g.throughput-1.0/3) > 1e-12 || math.Abs(g.rate-7.0/3) > 1e-12 {
		t.Fatalf("global: %+v", *g)
	}
	// At 12.5 s the window is seconds 3..12: 2.5 + 9 s = 9.5 s wide, one arrival (at 3 s).
	if ts = tr.tenant("a", 12_500_000); math.Abs(ts.rate-1/9.5) > 1e-12 {
		t.Fatalf("at 12.5 s: rate %g, want 1/9.5", ts.rate)
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

// TestTrackerSteadyTenantIsNoBurst: a tenant arriving steadily at 12 req/s
// from the start of the run is measured at 12 req/s and never bursting
// (the rate divided by the full 10 s window before it had elapsed, so the
// first seconds looked like a burst); a real burst on top of a steady rate
// is still caught.
func TestTrackerSteadyTenantIsNoBurst(t *testing.T) {
	tr := NewTracker(0)
	const gap = 1_000_000 / 12
	n := 0
	arrive := func(at int64) *tenantStats {
		n++
		id := "r" + strconv.Itoa(n)
		tr.advance(at)
		ts := *tr.tenant("a", at)
		tr.arrived(id, "a", at)
		tr.decided(id, "a", true, false)
		return &ts
	}
	var at int64
	for ; at < 20_000_000; at += gap {
		ts := arrive(at)
		if ts.burst {
			t.Fatalf("steady 12 req/s: burst detected at %d µs (rate %.2f, count %d)", at, ts.rate, ts.count)
		}
		if at >= 2_000_000 && math.Abs(ts.rate-12) > 1 {
			t.Fatalf("steady 12 req/s: rate %.2f at %d µs", ts.rate, at)
		}
	}
	// 80 requests within 200 ms: a burst.
	burst := false
	for k := 0; k < 80; k++ {
		burst = arrive(at+int64(k)*2_500).burst || burst
	}
	if !burst {
		t.Fatal("80 arrivals in 200 ms over a 12 req/s tenant: no burst detected")
	}
}
