package summary

import (
	"path/filepath"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// TestHoldRowsNotMined: routing rows with action wait (a request held at
// the router) are counted as holds, with their reasons, and kept out of
// the routing targets, reasons and pattern mining: a hold has no target
// and no outcome of its own (its request's route row has them).
func TestHoldRowsNotMined(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.arrow")
	schema := trace.DecisionsSchema(trace.NewMeta())
	s, err := trace.Create(path, nil, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewDecisionWriter(s, schema)
	var d trace.Decision
	seq := int64(0)
	add := func(id, action, target, reason string, ttft int64, status string) {
		d.Reset()
		seq++
		d.Seq, d.TimeUS, d.Kind, d.RequestID, d.Action, d.Target, d.Reason = seq, seq*10, trace.DecisionRouting, id, action, target, reason
		d.TTFTUS, d.Status = ttft, status
		if err := w.Write(&d); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 30; i++ {
		id := string(rune('a'+i%26)) + string(rune('0'+i/26))
		if i%3 == 0 {
			add(id, "wait", "", "queues busy", trace.Null, "")
		}
		add(id, "route", "d/0", "least-loaded", int64(1000+i), trace.StatusCompleted)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dec, err := readDecisions(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Holds != 10 || dec.HoldReasons["queues busy"] != 10 || dec.ByKind[trace.DecisionRouting] != 40 {
		t.Fatalf("holds %d (%v), routing rows %d", dec.Holds, dec.HoldReasons, dec.ByKind[trace.DecisionRouting])
	}
	if dec.Targets[""] != 0 || dec.Targets["d/0"] != 30 || dec.Reasons["queues busy"] != 0 {
		t.Fatalf("targets %v, reasons %v", dec.Targets, dec.Reasons)
	}
	if n := len(dec.mine.rows); n != 30 {
		t.Fatalf("%d rows mined, want the 30 route rows", n)
	}
}
