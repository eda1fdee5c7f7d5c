package engine

import (
	"testing"

	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

// hostLinear is the test's linear model with engine CPU work of perSeq µs
// per request in the batch (latency.HostTimer).
type hostLinear struct {
	*latency.Linear
	perSeq int64
}

func (h hostLinear) HostStepUS(b *latency.Batch) int64 { return h.perSeq * int64(b.Size()) }
func (h hostLinear) HostTimed() bool                   { return h.perSeq > 0 }

// One request alone: the synchronous scheduler adds the CPU work to every
// step, the async one overlaps it (shorter than the GPU step here) or, when
// longer, waits for it.
func TestHostWorkBySchedulerMode(t *testing.T) {
	for _, tc := range []struct {
		name     string
		async    bool
		perSeq   int64
		ttft     int64 // prefill step: 1000 + 1·100 µs GPU
		e2e      int64 // + 4 decode steps of 1000 + 10 µs
		sameAsNo bool  // identical to the model without CPU work
	}{
		{"sync, none", false, 0, 1100, 1100 + 4*1010, true},
		{"sync, 40 µs", false, 40, 1140, 1140 + 4*1050, false},
		{"async, hidden", true, 40, 1100, 1100 + 4*1010, true},
		{"async, CPU-bound", true, 5000, 5000, 5000 * 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			c.Engine.AsyncScheduling = tc.async
			lin := testModel(c)[0].(*latency.Linear)
			sink := &memSink{}
			_, err := Run(c, []latency.Model{hostLinear{lin, tc.perSeq}}, SliceSource([]row.Request{req("a", 0, 100, 5)}), sink, Options{CheckInvariants: true})
			if err != nil {
				t.Fatal(err)
			}
			r := sink.rs[0]
			if r.TTFTUS != tc.ttft || r.E2EUS != tc.e2e {
				t.Fatalf("ttft %d e2e %d, want %d %d", r.TTFTUS, r.E2EUS, tc.ttft, tc.e2e)
			}
		})
	}
}
