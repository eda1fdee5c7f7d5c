package sched

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/latency"
)

// Sliding-window attention (Config.Window > 0; docs/latency.md, "Sliding
// windows"): a windowed layer's decode reads min(ctx, W−1) cached tokens,
// so the batch carries Σ min(ctx, W−1) over the decoding requests
// (latency.Batch.DecodeCtxW) beside Σ ctx. Kept like DecodeCtx, without
// touching every request on every step: a decoding request is below the
// window (its context grows with the step) until the step at which its
// context reaches W−1, and past it from then on (W−1 for good). Those
// crossing steps are a heap; a request is past the window exactly when
// its crossing step is at most winP, the last step whose crossings were
// applied. A model without a window never reaches this code.
type window struct {
	w     int64    // W
	a     int64    // Σ (C0 − S0) over the decoding requests below the window
	n     int      // decoding requests below the window
	over  int      // decoding requests past it
	cross stepHeap // crossing steps of those below (epoch-checked)
	p     int64    // crossings applied up to this step
}

// cross is the step at which r's decode context reaches W−1.
func (w *window) crossStep(r *request.State) int64 {
	return r.S0 + w.w - 1 - int64(r.C0)
}

// start counts r, which starts decoding (S0, C0 set).
func (w *window) start(r *request.State) {
	if x := w.crossStep(r); x > w.p {
		w.a += int64(r.C0) - r.S0
		w.n++
		w.cross.push(x, r)
	} else {
		w.over++
	}
}

// stop uncounts r, which stops decoding (its crossing entry goes stale
// with its epoch).
func (w *window) stop(r *request.State) {
	if w.crossStep(r) > w.p {
		w.a -= int64(r.C0) - r.S0
		w.n--
	} else {
		w.over--
	}
}

// fill applies the crossings due by step and sets the batch's windowed
// sums: the prefill chunks' (sched, each with its Chunk) and the decodes'.
func (w *window) fill(b *latency.Batch, sched []*request.State, step int64) {
	for r := w.cross.popDue(step); r != nil; r = w.cross.popDue(step) {
		w.a -= int64(r.C0) - r.S0
		w.n--
		w.over++
	}
	w.p = step
	for _, r := range sched {
		ctx, n := int64(r.Computed), int64(r.Chunk)
		b.PrefillAttnW += latency.WindowPairs(ctx, n, w.w)
		b.PrefillCtxW += min(ctx, w.w-1)
	}
	b.DecodeCtxW = w.a + int64(w.n)*step + int64(w.over)*(w.w-1)
}

// spanEnd is the last step a leap may run to from first: a ramp prices
// Σ min(ctx, W−1) as min(Σ ctx, seqs·(W−1)), which is exact while every
// decoding request is on the same side of the window. With requests on
// both sides there is no span (ok false); with all below, the span ends
// at the first crossing step, where the two forms still agree.
func (w *window) spanEnd(first, last int64) (int64, bool) {
	if w.n == 0 {
		return last, true
	}
	if w.over > 0 {
		return 0, false
	}
	if x, ok := w.cross.firstLive(); ok && x < last {
		return max(x, first), true
	}
	return last, true
}

// check verifies the counts against the decoding requests.
func (w *window) check(step int64, decoding int) error {
	if w.n+w.over != decoding || w.n < 0 || w.over < 0 {
		return fmt.Errorf("step %d: sliding window counts %d below and %d past for %d decoding requests", step, w.n, w.over, decoding)
	}
	live := 0
	for i := range w.cross.S {
		if w.cross.live(&w.cross.S[i]) {
			live++
		}
	}
	if live != w.n {
		return fmt.Errorf("step %d: %d live window-crossing entries for %d decoding requests below the window", step, live, w.n)
	}
	return nil
}

func (w *window) clone(c *request.Clone) *window {
	d := *w
	d.cross.S = make([]stepEntry, len(w.cross.S))
	for i, e := range w.cross.S {
		if e.r != nil {
			e.r, e.epoch = c.MapEntry(e.r, e.epoch)
		}
		d.cross.S[i] = e
	}
	return &d
}
