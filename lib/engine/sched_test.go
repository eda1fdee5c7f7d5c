package engine

import (
	"sort"
	"testing"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
)

type shortestFirst struct{}

func (shortestFirst) Sort(_ int64, w []*request.State) {
	sort.SliceStable(w, func(i, j int) bool { return w[i].Req.InputTokens < w[j].Req.InputTokens })
}

type oldestVictim struct{}

func (oldestVictim) Choose(running []*request.State) *request.State { return running[0] }

// TestSchedulerSeams plugs a waiting order and a preemption victim into
// vLLM's scheduler: the budget and max_num_seqs are still the engine's.
func TestSchedulerSeams(t *testing.T) {
	t.Run("order", func(t *testing.T) {
		c := testConfig()
		c.Engine.MaxNumSeqs = 1
		reqs := []row.Request{req("a", 0, 100, 5), req("b", 10, 400, 2), req("c", 20, 50, 2)}
		fcfs, _ := run(t, c, reqs, Options{})
		sjf, _ := run(t, c, reqs, Options{Policies: cluster.Policies{Scheduling: func(int32) (sched.Order, sched.Victim) { return shortestFirst{}, nil }}})
		f, s := fcfs.byID(), sjf.byID()
		if !(f["b"].FirstScheduledUS < f["c"].FirstScheduledUS) || !(s["c"].FirstScheduledUS < s["b"].FirstScheduledUS) {
			t.Fatalf("fcfs b %d c %d; shortest-first b %d c %d", f["b"].FirstScheduledUS, f["c"].FirstScheduledUS, s["b"].FirstScheduledUS, s["c"].FirstScheduledUS)
		}
	})
	t.Run("victim", func(t *testing.T) {
		// 12 blocks of 16: a and b decode together until their KV needs a
		// 13th block; vLLM preempts the newer (b), the policy the older (a).
		c := testConfig()
		c.Engine.KVBlocks = 12
		reqs := []row.Request{req("a", 0, 64, 80), req("b", 1, 64, 80)}
		dflt, _ := run(t, c, reqs, Options{})
		old, sum := run(t, c, reqs, Options{Policies: cluster.Policies{Scheduling: func(int32) (sched.Order, sched.Victim) { return nil, oldestVictim{} }}})
		d, o := dflt.byID(), old.byID()
		if d["b"].Preemptions == 0 || d["a"].Preemptions != 0 || o["a"].Preemptions == 0 {
			t.Fatalf("default a %d b %d; oldest-victim a %d b %d", d["a"].Preemptions, d["b"].Preemptions, o["a"].Preemptions, o["b"].Preemptions)
		}
		if sum.Completed != 2 {
			t.Fatalf("%+v", sum)
		}
	})
}

// TestAsyncScheduling: with vLLM's async scheduling a request reaching the
// queue during step n is first scheduled in step n+2 (n+1 was formed while
// n ran); an engine with nothing else to run takes it at once.
func TestAsyncScheduling(t *testing.T) {
	// Linear model β = (1000, 1, 10): a's prefill of 100 tokens is step 0
	// (0–1100), its decodes steps 1, 2, ... of 1010 µs (alone).
	for _, tc := range []struct {
		name      string
		async     bool
		aOut      int32
		wantBSchd int64
	}{
		{"sync: b joins step 1", false, 10, 1100},
		{"async: b joins step 2", true, 10, 1100 + 1010},
		{"async, engine idle after step 0: b at once", true, 1, 1100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			c.Engine.AsyncScheduling = tc.async
			sink, _ := run(t, c, []row.Request{req("a", 0, 100, tc.aOut), req("b", 500, 50, 5)}, Options{})
			got := sink.byID()
			if got["a"].FirstScheduledUS != 0 || got["b"].FirstScheduledUS != tc.wantBSchd {
				t.Fatalf("a first scheduled %d, b %d; want 0 and %d", got["a"].FirstScheduledUS, got["b"].FirstScheduledUS, tc.wantBSchd)
			}
		})
	}
}
