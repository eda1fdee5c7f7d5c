package engine

import (
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
)

func withTimeout(r row.Request, us int64) row.Request { r.TimeoutUS = us; return r }

// Linear model β = (1000, 1, 10): a prefill of n tokens alone takes 1000+n
// µs, a decode step alone 1010 µs.
func TestTimeouts(t *testing.T) {
	t.Run("waiting", func(t *testing.T) {
		// One sequence at a time: b waits behind a (a's prefill ends at
		// 1100, then 9 decodes of 1010 µs) and gives up at 3000.
		c := testConfig()
		c.Engine.MaxNumSeqs = 1
		sink, sum := run(t, c, []row.Request{req("a", 0, 100, 10), withTimeout(req("b", 0, 100, 10), 3000)}, Options{})
		b := sink.byID()["b"]
		if b.Status != row.StatusTimedOut || b.FinishedUS != 3000 || b.E2EUS != 3000 || b.GeneratedTokens != 0 || b.FirstScheduledUS != row.Null {
			t.Fatalf("%+v", b)
		}
		if sum.TimedOut != 1 || sum.Completed != 1 {
			t.Fatalf("%+v", sum)
		}
	})
	t.Run("running mid-step", func(t *testing.T) {
		// a's prefill ends at 1100 (first token), decodes end at 2110,
		// 3120, 4130, ...; the client leaves at 3500, during the third step:
		// it saw 3 tokens; its KV is freed when that step ends (4130), and
		// its dependent is dropped.
		c := testConfig()
		child := row.NewRequest("next")
		child.InputTokens, child.OutputTokens, child.DependsOn = 10, 1, []string{"a"}
		sink, sum := run(t, c, []row.Request{withTimeout(req("a", 0, 100, 10), 3500), child, req("later", 5000, 10, 1)}, Options{})
		got := sink.byID()
		a := got["a"]
		if a.Status != row.StatusTimedOut || a.FinishedUS != 3500 || a.GeneratedTokens != 3 || a.FirstTokenUS != 1100 {
			t.Fatalf("%+v", a)
		}
		if n := got["next"]; n.Status != row.StatusDropped || n.DropReason != "dependency a timed_out" {
			t.Fatalf("%+v", n)
		}
		// The replica is free for a later request at once.
		if l := got["later"]; l.Status != row.StatusCompleted || l.FirstScheduledUS != 5000 {
			t.Fatalf("%+v", l)
		}
		if sum.TimedOut != 1 || sum.Dropped != 1 {
			t.Fatalf("%+v", sum)
		}
	})
	t.Run("finishing at the deadline completes", func(t *testing.T) {
		c := testConfig()
		sink, _ := run(t, c, []row.Request{withTimeout(req("a", 0, 100, 2), 2110)}, Options{})
		if a := sink.rs[0]; a.Status != row.StatusCompleted || a.FinishedUS != 2110 {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("in the alpha delay", func(t *testing.T) {
		c := testConfig()
		c.Latency.Alpha = []float64{5000, 0, 0}
		sink, _ := run(t, c, []row.Request{withTimeout(req("a", 0, 100, 2), 1000), req("b", 2000, 10, 1)}, Options{})
		got := sink.byID()
		if a := got["a"]; a.Status != row.StatusTimedOut || a.EnqueuedUS != row.Null || a.RoutedUS != 0 {
			t.Fatalf("%+v", a)
		}
		if b := got["b"]; b.Status != row.StatusCompleted {
			t.Fatalf("%+v", b)
		}
	})
	t.Run("client_timeout default", func(t *testing.T) {
		c := testConfig()
		c.Engine.MaxNumSeqs = 1
		c.ClientTimeout = config.Duration(2 * time.Millisecond)
		// a and c have their own, longer timeouts: they wait it out and complete.
		sink, sum := run(t, c, []row.Request{withTimeout(req("a", 0, 100, 10), 60_000_000), req("b", 0, 100, 10), withTimeout(req("c", 0, 100, 10), 60_000_000)}, Options{})
		got := sink.byID()
		if got["b"].Status != row.StatusTimedOut || got["b"].FinishedUS != 2000 || got["c"].Status != row.StatusCompleted {
			t.Fatalf("b %+v\nc %+v", got["b"], got["c"])
		}
		if sum.TimedOut != 1 {
			t.Fatalf("%+v", sum)
		}
	})
}
