package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// A tree-of-thought session cut at the horizon: 4 candidates spawned, 3
// finished, the 4th running (unfinished) and refine never released. A
// second, complete session fans out 2 candidates. Request types group
// with --by request_type.
func TestAgenticCutAndFanOut(t *testing.T) {
	rows := []res{
		{id: "t1-d", status: "completed", sess: "t1", step: "decompose", arr: 0, inst: 0, enq: 100, sched: 200, first: 1000, fin: 2000, gen: 5, tpot: 200, in: 50, recT: N, recE: N, recI: N},
		{id: "t1-c0", status: "completed", sess: "t1", step: "candidate", deps: []string{"t1-d"}, arr: N, inst: 0, enq: 2100, sched: 2200, first: 3000, fin: 4000, gen: 5, tpot: 200, in: 60, recT: N, recE: N, recI: N},
		{id: "t1-c1", status: "completed", sess: "t1", step: "candidate", deps: []string{"t1-d"}, arr: N, inst: 0, enq: 2100, sched: 2200, first: 3000, fin: 4000, gen: 5, tpot: 200, in: 60, recT: N, recE: N, recI: N},
		{id: "t1-c2", status: "completed", sess: "t1", step: "candidate", deps: []string{"t1-d"}, arr: N, inst: 0, enq: 2100, sched: 2200, first: 3000, fin: 4000, gen: 5, tpot: 200, in: 60, recT: N, recE: N, recI: N},
		{id: "t1-c3", status: "unfinished", sess: "t1", step: "candidate", deps: []string{"t1-d"}, arr: N, inst: 0, enq: 2100, sched: 2200, first: 3000, fin: N, gen: 2, tpot: N, in: 60, recT: N, recE: N, recI: N},
		{id: "t2-d", status: "completed", sess: "t2", step: "decompose", arr: 10, inst: 0, enq: 100, sched: 200, first: 1000, fin: 2000, gen: 5, tpot: 200, in: 50, recT: N, recE: N, recI: N},
		{id: "t2-c0", status: "completed", sess: "t2", step: "candidate", deps: []string{"t2-d"}, arr: N, inst: 0, enq: 2100, sched: 2200, first: 3000, fin: 4000, gen: 5, tpot: 200, in: 60, recT: N, recE: N, recI: N},
		{id: "t2-c1", status: "completed", sess: "t2", step: "candidate", deps: []string{"t2-d"}, arr: N, inst: 0, enq: 2100, sched: 2200, first: 3000, fin: 4000, gen: 5, tpot: 200, in: 60, recT: N, recE: N, recI: N},
	}
	path := filepath.Join(t.TempDir(), "tot.arrows")
	sink, err := trace.Create(path, nil, trace.ResultsSchema(trace.NewMeta()))
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewResultWriter(sink, trace.ResultsSchema(trace.NewMeta()))
	for _, x := range rows {
		r := toResult(x, 2000)
		r.RequestType = trace.TypeAgentic
		if x.sess == "t2" {
			r.RequestType = trace.TypeReasoning
		}
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	// refine: never released before the horizon (null arrival).
	ref := trace.NewRequest("t1-r")
	ref.DependsOn, ref.SessionID, ref.StepID, ref.InputTokens, ref.RequestType = []string{"t1-c0", "t1-c1", "t1-c2", "t1-c3"}, "t1", "refine", 10, trace.TypeAgentic
	rr := trace.NewResult(ref)
	rr.Status, rr.InstanceID = trace.StatusUnfinished, -1
	if err := w.Write(&rr); err != nil {
		t.Fatal(err)
	}
	// t3 starts after the horizon: never started, neither cut nor counted.
	late := trace.NewRequest("t3-d")
	late.ArrivalUS, late.SessionID, late.StepID, late.InputTokens = 9_000_000, "t3", "decompose", 10
	lr := trace.NewResult(late)
	lr.Status, lr.DropReason, lr.InstanceID = trace.StatusUnfinished, "arrives after horizon", -1
	if err := w.Write(&lr); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Build([]string{path}, Options{By: "request_type"})
	if err != nil {
		t.Fatal(err)
	}
	st := rep.runs[0].sess.summarize()
	// t1 reached 5 steps (decompose + 4 candidates; refine never arrived), t2 3.
	if st.total != 3 || st.cut != 1 || st.reached.Count() != 2 || st.reachedCut.Max() != 5 || st.reached.Max() != 5 || st.reached.Quantile(0) != 3 {
		t.Fatalf("cut %d reached %v..%v cut reached %v", st.cut, st.reached.Quantile(0), st.reached.Max(), st.reachedCut.Max())
	}
	if st.fanSpawned != 6 || st.fanFinished != 5 {
		t.Fatalf("fan-out spawned %d finished %d, want 6 and 5", st.fanSpawned, st.fanFinished)
	}
	var b bytes.Buffer
	if err := rep.Write(&b, FormatTable); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"cut_sessions", "steps_reached_cut", "fanout_utilisation", "0.833", "request_type", "agentic", "reasoning"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
