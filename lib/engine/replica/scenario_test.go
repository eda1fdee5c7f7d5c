package replica_test

import (
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine/internal/scenario"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

// TestScenarios runs testdata/*.txt: one replica driven through Start and
// End as the cluster drives it, logging the effects End returns (requests
// that left, the step row) (docs/engine.md, "Scenario tests"). Commands:
//
//	config <engine keys> [role=monolithic|prefill|decode]
//	                  a fresh replica d/0 (scenario.ReadEngine)
//	enqueue [at=µs]   the input's requests join its waiting queue
//	start [at=µs]     Start: form a step
//	end [at=µs]       End the step (at its end by default): its effects
//	run [until=µs]    start and end steps back to back until idle
//	cancel <ids>      Cancel, as a client that gives up
//	print             the replica and every request's progress
func TestScenarios(t *testing.T) {
	scenario.Run(t, func() scenario.Harness { return (&harness{}).do })
}

type harness struct {
	scenario.Queue
	p       *replica.Replica
	stepEnd int64
	fx      replica.Effects
}

func (h *harness) do(t *testing.T, td *datadriven.TestData) string {
	a := scenario.Of(t, td)
	var log scenario.Log
	if td.Cmd != "config" && h.p == nil {
		a.Fatalf("%s before config", td.Cmd)
	}
	switch td.Cmd {
	case "config":
		eng := scenario.ReadEngine(a)
		role, ok := replica.ParseRole(a.Str("role", "monolithic"))
		if !ok {
			a.Fatalf("role: expected monolithic, prefill or decode")
		}
		a.Done()
		s, _ := eng.New()
		h.p = replica.New("d/0", 0, 0, role, eng.Model, s)
		h.p.WantSteps = true
		h.Reset()
		log.Printf("replica %s (%s, %s): %s", h.p.ID, h.p.Role, h.p.State, eng.String())
	case "enqueue":
		at, rs := h.Read(t, td, a, h.p.Busy())
		for _, r := range rs {
			r.Replica = h.p.Index
			// The cluster's part: a prefill replica runs the prompt only.
			r.PrefillOnly = h.p.Role == replica.Prefill && r.Req.OutputTokens > 0
			h.p.Sched.Enqueue(r)
		}
		log.Printf("t=%d enqueued %s; can start: %v", at, scenario.IDs(rs), h.p.CanStart())
	case "start":
		at := a.Int("at", h.Now)
		a.Done()
		h.Advance(a, at)
		h.start(t, &log)
	case "end":
		if !h.p.Busy() {
			a.Fatalf("end: no step executing")
		}
		at := a.Int("at", h.stepEnd)
		a.Done()
		h.end(a, &log, at)
	case "run":
		until := a.Int("until", row.Null)
		a.Done()
		for (until == row.Null || h.Now < until) && h.start(t, &log) {
			h.end(a, &log, h.stepEnd)
		}
	case "cancel":
		for _, id := range a.Names() {
			r := h.Get(a, id)
			was := scenario.Phase(r.Phase)
			r.Generated = h.p.Sched.Progress(r)
			if h.p.Cancel(r) {
				r.Phase, r.Status = request.Done, "cancelled"
				log.Printf("t=%d %s cancelled (was %s): left at once; kv %d/%d", h.Now, id, was, h.p.Sched.KV().Used(), h.p.Sched.KV().Total())
			} else {
				log.Printf("t=%d %s cancelled (was %s): leaves when the executing step ends", h.Now, id, was)
			}
		}
		a.Done()
	case "print":
		a.Done()
		kv := h.p.Sched.KV()
		log.Printf("t=%d %s %s: busy %v, can start %v; %d waiting, %d running; kv %d/%d; %d steps, %d µs busy",
			h.Now, h.p.ID, h.p.State, h.p.Busy(), h.p.CanStart(), h.p.Sched.Waiting(), h.p.Sched.Running(),
			kv.Used(), kv.Total(), h.p.Steps, h.p.BusyUS)
		h.Print(&log, h.p.Sched.Progress)
	default:
		a.Fatalf("unknown command %q", td.Cmd)
	}
	return log.String()
}

// start calls Start at now; false when there was nothing to run.
func (h *harness) start(t *testing.T, log *scenario.Log) bool {
	can := h.p.CanStart()
	_, dur, ok := h.p.Start(h.Now, false) // one step at a time: its end is h.Now + dur
	if !ok {
		log.Printf("t=%d start: nothing to run (can start: %v)", h.Now, can)
		return false
	}
	if err := h.p.Check(true); err != nil {
		t.Fatalf("invariant violated: %v", err)
	}
	h.stepEnd = h.Now + dur
	log.Printf("t=%d start step %d: %d µs, ends at %d; %s", h.Now, h.p.Sched.StepIndex(), dur, h.stepEnd, scenario.Batch(h.Reqs, batchOf(h)))
	return true
}

// end calls End at at and logs its effects.
func (h *harness) end(a *scenario.Args, log *scenario.Log, at int64) {
	if at < h.Now {
		a.Fatalf("at=%d is before the step's start (%d)", at, h.Now)
	}
	h.Now = at
	h.p.End(at, &h.fx)
	s := &h.fx.Step
	log.Printf("t=%d end: step row #%d %s start %d dur %d: batch %d, prefill %d, decode %d, kv %d/%d, %d waiting, %d running, %d preempted",
		at, s.StepIndex, s.Role, s.StartUS, s.DurationUS, s.BatchSize, s.PrefillTokens, s.DecodeTokens,
		s.KVBlocksUsed, s.KVBlocksTotal, s.Waiting, s.Running, s.Preempted)
	for _, r := range h.fx.Done {
		switch {
		case r.Cancel:
			log.Printf("  done: %s cancelled with the step's end, %d tokens generated, its KV freed", r.Req.ID, r.Generated)
			r.Cancel, r.Phase, r.Status = false, request.Done, "cancelled"
		case r.Phase == request.Transfer:
			log.Printf("  done: %s", scenario.Outcome(r))
		default:
			log.Printf("  done: %s", scenario.Outcome(r))
			r.Phase = request.Done
		}
	}
}

// batchOf rebuilds the step's totals for the log from the scheduled
// requests (the replica keeps its batch to itself).
func batchOf(h *harness) *latency.Batch {
	var b latency.Batch
	for _, r := range h.Reqs {
		if r.Chunk > 0 {
			b.PrefillTokens += int64(r.Chunk)
		} else if r.Decoding && r.Phase == request.Running {
			b.DecodeSeqs++
		}
	}
	return &b
}
