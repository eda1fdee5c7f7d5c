package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/trace"
)

// TestClientCap: a client with at most N requests in flight
// (blis.max_in_flight). Linear model β = (1000, 1, 10): a prefill of n
// tokens alone takes 1000+n µs, a decode step alone 1010 µs.
func TestClientCap(t *testing.T) {
	t.Run("a request waits for a slot and counts from its send", func(t *testing.T) {
		// a: prefill 1100 (first token), one decode: finished 2110. b is
		// due at 500 but sent at 2110, when a ends.
		sink, _ := run(t, testConfig(), []trace.Request{req("a", 0, 100, 2), req("b", 500, 100, 2)}, Options{MaxInFlight: 1})
		got := sink.byID()
		if a := got["a"]; a.ClientWaitUS != 0 || a.ArrivalUS != 0 || a.FinishedUS != 2110 {
			t.Fatalf("a: %+v", a)
		}
		b := got["b"]
		if b.ClientWaitUS != 1610 || b.ArrivalUS != 2110 || b.FirstTokenUS != 2110+1100 || b.TTFTUS != 1100 || b.E2EUS != 2110 {
			t.Fatalf("b: %+v", b)
		}
	})
	t.Run("first come first served", func(t *testing.T) {
		sink, _ := run(t, testConfig(), []trace.Request{req("a", 0, 100, 1), req("c", 200, 100, 1), req("b", 100, 100, 1)}, Options{MaxInFlight: 1})
		got := sink.byID()
		if !(got["b"].ArrivalUS < got["c"].ArrivalUS) || got["b"].ArrivalUS != got["a"].FinishedUS || got["c"].ArrivalUS != got["b"].FinishedUS {
			t.Fatalf("order: a %+v b %+v c %+v", got["a"], got["b"], got["c"])
		}
	})
	t.Run("a cap never reached changes nothing but the column", func(t *testing.T) {
		reqs := workload(3, 200)
		free, _ := run(t, testConfig(), reqs, Options{})
		capped, _ := run(t, testConfig(), reqs, Options{MaxInFlight: len(reqs)})
		for i := range capped.rs {
			want := int64(0)
			if capped.rs[i].Kind == trace.KindTool {
				want = trace.Null // a timer of the client, not a request
			}
			if capped.rs[i].ClientWaitUS != want || free.rs[i].ClientWaitUS != trace.Null {
				t.Fatalf("client_wait_us: capped %d, free %d", capped.rs[i].ClientWaitUS, free.rs[i].ClientWaitUS)
			}
			capped.rs[i].ClientWaitUS = trace.Null
		}
		if !reflect.DeepEqual(free.rs, capped.rs) {
			t.Fatal("results differ")
		}
	})
	t.Run("the timeout counts from the send", func(t *testing.T) {
		// b is sent at 2110 and gives up at 2110 + 1500, mid-prefill of a
		// long prompt.
		sink, sum := run(t, testConfig(), []trace.Request{req("a", 0, 100, 2), withTimeout(req("b", 0, 5000, 2), 1500)}, Options{MaxInFlight: 1})
		b := sink.byID()["b"]
		if b.Status != trace.StatusTimedOut || b.ArrivalUS != 2110 || b.FinishedUS != 2110+1500 {
			t.Fatalf("b: %+v", b)
		}
		if sum.TimedOut != 1 {
			t.Fatalf("%+v", sum)
		}
	})
	t.Run("dependents take slots; tools do not", func(t *testing.T) {
		// turn 2 of session s depends on turn 1; the tool row runs while
		// x holds the only slot.
		t2 := req("s-t2", 0, 50, 1)
		t2.DependsOn = []string{"s-t1"}
		tool := trace.NewRequest("tool")
		tool.Kind, tool.DependsOn, tool.DelayUS = trace.KindTool, []string{"s-t1"}, 10
		sink, _ := run(t, testConfig(), []trace.Request{req("s-t1", 0, 100, 1), req("x", 0, 100, 1), t2, tool}, Options{MaxInFlight: 1})
		got := sink.byID()
		if got["x"].ArrivalUS != got["s-t1"].FinishedUS {
			t.Fatalf("x: %+v", got["x"])
		}
		if got["tool"].ClientWaitUS != trace.Null || got["tool"].FinishedUS != got["s-t1"].FinishedUS+10 {
			t.Fatalf("tool: %+v", got["tool"])
		}
		if got["s-t2"].ArrivalUS != got["x"].FinishedUS || got["s-t2"].ClientWaitUS != got["x"].FinishedUS-got["s-t1"].FinishedUS {
			t.Fatalf("s-t2: %+v (x finished %d)", got["s-t2"], got["x"].FinishedUS)
		}
	})
	t.Run("waiting at the horizon", func(t *testing.T) {
		c := testConfig()
		c.Horizon = config.Duration(1500 * time.Microsecond)
		sink, _ := run(t, c, []trace.Request{req("a", 0, 100, 5), req("b", 100, 100, 5)}, Options{MaxInFlight: 1})
		b := sink.byID()["b"]
		if b.Status != trace.StatusUnfinished || b.DropReason != "waiting for one of the client's 1 in-flight slots" || b.ClientWaitUS <= 0 {
			t.Fatalf("b: %+v", b)
		}
	})
}

// TestArrivalWithDependencies: a row with both arrival_us and depends_on
// arrives at the later of its own time and its last dependency's finish
// plus delay_us (docs/tables.md).
func TestArrivalWithDependencies(t *testing.T) {
	for _, tc := range []struct {
		name       string
		own, delay int64
		want       int64 // a finishes at 1110 (prefill 1100 + one decode... out 1)
	}{
		{"dependency later", 500, 0, 1100},
		{"dependency later with delay", 500, 300, 1400},
		{"own time later", 5000, 300, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := req("b", tc.own, 10, 1)
			b.DependsOn, b.DelayUS = []string{"a"}, tc.delay
			sink, _ := run(t, testConfig(), []trace.Request{req("a", 0, 100, 1), b}, Options{})
			got := sink.byID()
			if got["a"].FinishedUS != 1100 {
				t.Fatalf("a: %+v", got["a"])
			}
			if got["b"].ArrivalUS != tc.want {
				t.Fatalf("b arrived at %d, want %d", got["b"].ArrivalUS, tc.want)
			}
		})
	}
}
