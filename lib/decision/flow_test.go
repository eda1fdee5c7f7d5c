package decision

import (
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/trace"
)

// The gateway's flow control writes flow_control rows: one replica that
// takes one request at a time (concurrency detector, 1 per replica), three
// requests at once: a is routed, b and c wait (enqueue, band 0), one place
// in the queue sheds nothing (same band) and rejects c, b is dispatched
// when a leaves (value: its wait).
func TestFlowControlDecisions(t *testing.T) {
	c := testConfig(1, "round-robin")
	fc := config.DefaultFlowControl()
	fc.Saturation.Detector, fc.Saturation.MaxConcurrency, fc.MaxRequests = "concurrency", 1, 1
	c.Router.FlowControl = &fc
	var reqs []trace.Request
	for _, id := range []string{"a", "b", "c"} {
		r := trace.NewRequest(id)
		r.ArrivalUS, r.InputTokens, r.OutputTokens = 0, 50, 3
		reqs = append(reqs, r)
	}
	models, _, err := engine.Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	ds := &decisions{}
	rec := New(Config{Level: Decisions, Decisions: ds})
	opts := engine.Options{CheckInvariants: true}
	rec.Attach(&opts)
	res := &results{}
	if _, err := engine.Run(c, models, engine.SliceSource(reqs), rec.Sink(res), opts); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	var wait int64
	for _, x := range ds.ds {
		if x.Kind == trace.DecisionFlow {
			got = append(got, x.RequestID+":"+x.Action)
			if x.Action == "dispatch" {
				wait = x.Value
			}
		}
	}
	want := []string{"b:enqueue", "c:reject", "b:dispatch"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || wait <= 0 {
		t.Fatalf("flow_control rows %v (dispatch wait %d), want %v", got, wait, want)
	}
}
