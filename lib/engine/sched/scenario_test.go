package sched_test

import (
	"fmt"
	"strings"
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
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.do(t, td)
		})
	})
}

type harness struct {
	s        *sched.VLLM
	rs       []*request.State
	by       map[string]*request.State
	now      int64
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
		h.rs, h.by, h.now, h.formed = nil, map[string]*request.State{}, 0, false
		log.Printf("vLLM: %s", h.eng.String())
	case "enqueue":
		at := a.Int("at", h.now)
		a.Done()
		if at < h.now {
			a.Fatalf("at=%d is before now (%d)", at, h.now)
		}
		if !h.formed {
			h.now = at // during a step, the clock stays at its start
		}
		var ids []string
		for _, l := range scenario.Lines(t, td) {
			if h.by[l.Name] != nil {
				l.Fatalf("request %s enqueued twice", l.Name)
			}
			r := scenario.State(scenario.Request(l.Name, l.Args))
			l.Done()
			r.Prio = int64(r.Req.Priority) // the cluster's priority stage, under scheduling_policy: priority
			r.Enqueued = at
			h.rs = append(h.rs, r)
			h.by[l.Name] = r
			h.s.Enqueue(r)
			ids = append(ids, l.Name)
		}
		during := ""
		if h.formed {
			during = fmt.Sprintf(" (during step %d)", h.s.StepIndex())
		}
		log.Printf("t=%d enqueued %s%s", at, strings.Join(ids, ", "), during)
	case "form":
		at := a.Int("at", h.now)
		a.Done()
		h.advance(a, at)
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
		for (until == row.Null || h.now < until) && h.form(t, &log) {
			h.complete(a, &log, h.stepEnd)
		}
	case "cancel":
		for _, id := range a.Names() {
			r := h.by[id]
			if r == nil {
				a.Fatalf("cancel: no request %s", id)
			}
			was := scenario.Phase(r.Phase)
			r.Generated = h.s.Progress(r) // the caller's part (the cluster's)
			h.s.Cancel(r)
			r.Phase, r.Status = request.Done, "cancelled"
			log.Printf("t=%d cancelled %s (was %s); kv %d/%d used", h.now, id, was, h.s.KV().Used(), h.s.KV().Total())
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

// advance moves the clock to at (never back).
func (h *harness) advance(a *scenario.Args, at int64) {
	if at < h.now {
		a.Fatalf("at=%d is before now (%d)", at, h.now)
	}
	h.now = at
}

// form forms the next step at now; false when there is nothing to run.
func (h *harness) form(t *testing.T, log *scenario.Log) bool {
	if h.formed {
		t.Fatalf("a step is already formed: complete it first")
	}
	h.preempts = h.preempts[:0]
	idx := h.s.StepIndex()
	if !h.s.Form(h.now, &h.batch) {
		log.Printf("t=%d nothing to run (%d waiting)", h.now, h.s.Waiting())
		return false
	}
	if err := h.s.Check(true); err != nil {
		t.Fatalf("step %d: invariant violated: %v", idx, err)
	}
	h.formed = true
	h.stepEnd = h.now + h.eng.Model.StepTime(&h.batch)
	kv := h.s.KV()
	log.Printf("step %d [%d, %d): %s; kv %d/%d; %d waiting", idx, h.now, h.stepEnd,
		scenario.Batch(h.rs, &h.batch), kv.Used(), kv.Total(), h.s.Waiting())
	for _, id := range h.preempts {
		log.Printf("  preempted %s", id)
	}
	return true
}

// complete ends the step formed at at, and logs first tokens and the
// requests that left.
func (h *harness) complete(a *scenario.Args, log *scenario.Log, at int64) {
	if at < h.now {
		a.Fatalf("at=%d is before the step's start (%d)", at, h.now)
	}
	first := make([]int64, len(h.rs))
	for i, r := range h.rs {
		first[i] = r.FirstTok
	}
	h.now = at
	h.formed = false
	h.done = h.done[:0]
	h.s.Complete(at, &h.done)
	for i, r := range h.rs {
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
	log.Printf("t=%d: %d waiting, %d running; kv %d/%d used, %d evictions; %d preemptions", h.now,
		h.s.Waiting(), h.s.Running(), kv.Used(), kv.Total(), kv.Evictions(), h.s.Preemptions())
	for _, r := range h.rs {
		if r.Phase == request.Done {
			log.Printf("%s", scenario.Outcome(r))
			continue
		}
		log.Printf("%s", scenario.Describe(r, h.s.Progress(r)))
	}
}
