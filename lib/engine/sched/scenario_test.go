package sched_test

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine/internal/scenario"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
)

// TestScenarios runs testdata/*.txt: one vLLM scheduler driven step by step
// (docs/engine.md, "Scenario tests"). Commands:
//
//	config <engine keys>     a fresh scheduler (scenario.ReadEngine)
//	enqueue [at=µs]          the input's requests join the waiting queue
//	                         (request keys: in, out, prio, prefix)
//	form [at=µs]             form the next step; its end is start + the
//	                         linear step time
//	complete [at=µs]         end the step formed (at its end by default)
//	step [n=1]               form and complete, n times back to back
//	run [until=µs]           step until nothing is left to run (or until)
//	cancel <ids>             take requests off the scheduler
//	print                    queues, KV and every request's progress
func TestScenarios(t *testing.T) {
	scenario.Run(t, func() scenario.Harness { return (&harness{}).do })
}

type harness struct {
	scenario.Queue
	s        *sched.VLLM
	formed   bool // a step is formed and not yet complete
	stepEnd  int64
	batch    latency.Batch
	eng      scenario.Engine
	preempts []string
	done     []*request.State
}

func (h *harness) do(t *testing.T, td *datadriven.TestData) string {
	a := scenario.Of(t, td)
	var log scenario.Log
	if td.Cmd != "config" && h.s == nil {
		a.Fatalf("%s before config", td.Cmd)
	}
	switch td.Cmd {
	case "config":
		h.eng = scenario.ReadEngine(a)
		a.Done()
		h.s, _ = h.eng.New()
		h.s.SetPreemptHook(func(r *request.State) { h.preempts = append(h.preempts, r.Req.ID) })
		h.Reset()
		h.formed = false
		log.Printf("vLLM: %s", h.eng.String())
	case "enqueue":
		at, rs := h.Read(t, td, a, h.formed)
		for _, r := range rs {
			r.Prio = float64(r.Req.Priority) // the cluster's priority stage, under scheduling_policy: priority
			h.s.Enqueue(r)
		}
		during := ""
		if h.formed {
			during = fmt.Sprintf(" (during step %d)", h.s.StepIndex())
		}
		log.Printf("t=%d enqueued %s%s", at, scenario.IDs(rs), during)
	case "form":
		at := a.Int("at", h.Now)
		a.Done()
		h.Advance(a, at)
		h.form(t, &log)
	case "complete":
		if !h.formed {
			a.Fatalf("complete: no step formed")
		}
		at := a.Int("at", h.stepEnd)
		a.Done()
		log.Printf("step %d ended at %d", h.s.StepIndex(), at)
		h.complete(a, &log, at)
	case "step":
		n := a.Int("n", 1)
		a.Done()
		for i := int64(0); i < n && h.form(t, &log); i++ {
			h.complete(a, &log, h.stepEnd)
		}
	case "run":
		until := a.Int("until", row.Null)
		a.Done()
		for (until == row.Null || h.Now < until) && h.form(t, &log) {
			h.complete(a, &log, h.stepEnd)
		}
	case "cancel":
		for _, id := range a.Names() {
			r := h.Get(a, id)
			was := scenario.Phase(r.Phase)
			r.Generated = h.s.Progress(r) // the caller's part (the cluster's)
			h.s.Cancel(r)
			r.Phase, r.Status = request.Done, "cancelled"
			log.Printf("t=%d cancelled %s (was %s); kv %d/%d used", h.Now, id, was, h.s.KV().Used(), h.s.KV().Total())
		}
		a.Done()
	case "print":
		a.Done()
		h.print(&log)
	default:
		a.Fatalf("unknown command %q", td.Cmd)
	}
	return log.String()
}

// form forms the next step at now; false when there is nothing to run.
func (h *harness) form(t *testing.T, log *scenario.Log) bool {
	if h.formed {
		t.Fatalf("a step is already formed: complete it first")
	}
	h.preempts = h.preempts[:0]
	idx := h.s.StepIndex()
	if !h.s.Form(h.Now, &h.batch) {
		log.Printf("t=%d nothing to run (%d waiting)", h.Now, h.s.Waiting())
		return false
	}
	if err := h.s.Check(true); err != nil {
		t.Fatalf("step %d: invariant violated: %v", idx, err)
	}
	h.formed = true
	h.stepEnd = h.Now + h.eng.StepTime(&h.batch)
	kv := h.s.KV()
	log.Printf("step %d [%d, %d): %s; kv %d/%d; %d waiting", idx, h.Now, h.stepEnd,
		scenario.Batch(h.Reqs, &h.batch), kv.Used(), kv.Total(), h.s.Waiting())
	for _, id := range h.preempts {
		log.Printf("  preempted %s", id)
	}
	return true
}

// complete ends the step formed at at, and logs first tokens and the
// requests that left.
func (h *harness) complete(a *scenario.Args, log *scenario.Log, at int64) {
	if at < h.Now {
		a.Fatalf("at=%d is before the step's start (%d)", at, h.Now)
	}
	first := make([]int64, len(h.Reqs))
	for i, r := range h.Reqs {
		first[i] = r.FirstTok
	}
	h.Now = at
	h.formed = false
	h.done = h.done[:0]
	h.s.Complete(at, &h.done)
	for i, r := range h.Reqs {
		if first[i] == row.Null && r.FirstTok != row.Null && r.Status == "" {
			log.Printf("  %s first token at %d", r.Req.ID, r.FirstTok)
		}
	}
	for _, r := range h.done {
		log.Printf("  %s", scenario.Outcome(r))
		if r.Status != "" {
			r.Phase = request.Done // the cluster's part: it makes them terminal
		}
	}
}

func (h *harness) print(log *scenario.Log) {
	kv := h.s.KV()
	log.Printf("t=%d: %d waiting, %d running; kv %d/%d used, %d evictions; %d preemptions", h.Now,
		h.s.Waiting(), h.s.Running(), kv.Used(), kv.Total(), kv.Evictions(), h.s.Preemptions())
	h.Print(log, h.s.Progress)
	if h.eng.Sched.LoRA != nil {
		log.Printf("lora: resident %v, %d loads", h.s.ResidentLoRAs(nil), h.s.LoRALoads())
	}
}
