package roofline

import "github.com/blis-sim/blis/lib/latency"

// Leaping (latency.Leaper): the engine prices runs of decode-only steps
// with a ramp, the step time as a function of the summed context, which
// must be StepTime's exactly. A decode-only batch's GEMMs, LM head,
// elementwise kernels, all-reduces and overheads depend on its size alone:
// they are costed once, by the code that costs every step; only the
// attention reads the context.

// DecodeCost is the cost of a decode-only batch of a fixed size as a
// function of its summed context: the Terms fields that change with it,
// in Terms' order of operations.
type DecodeCost struct {
	roof0, compute0, memory0 float64 // after the GEMMs
	elem, comm, over         float64 // the tail's memory time, all-reduces, overheads
	pairFLOPs, attnFLOPs     float64
	tokens, kvElems, kvBytes float64 // T; KV elements per token per layer and rank; bytes per element
	qo, bw, layers           float64 // query/output bytes of the batch; achieved B/s; layers
}

// DecodeCost returns the cost of batches of seqs decoding requests.
func (r *Roofline) DecodeCost(seqs int) DecodeCost {
	b := latency.Batch{DecodeSeqs: seqs}
	T := float64(b.PrefillTokens) + float64(b.DecodeSeqs)
	var base Terms
	r.weights(&base, &b, T)
	full := base
	r.attention(&full, &b, T)
	r.tail(&full, T) // its overheads and all-reduces do not depend on the context
	var tail Terms
	r.tail(&tail, T) // tail.RoofUS = 0 + its elementwise time, exactly
	return DecodeCost{roof0: base.RoofUS, compute0: base.ComputeUS, memory0: base.MemoryUS,
		elem: tail.RoofUS, comm: full.CommUS, over: full.OverheadUS,
		pairFLOPs: r.attnPairFLOPsD, attnFLOPs: r.attnFLOPs, tokens: T, kvElems: r.kvLayerRank, kvBytes: r.kvb,
		qo: T * r.qoElemsRank * r.ab, bw: r.bw, layers: float64(r.A.Layers)}
}

// At is Terms(&Batch{DecodeSeqs: seqs, DecodeCtx: ctx}).ComputeUS,
// MemoryUS and TotalUS exactly: attention's formulas with the prefill
// terms at zero (attention's own code is the reference: keep the two in
// step; TestDecodeCostExact checks every catalogue model and GPU).
func (d *DecodeCost) At(ctx int64) (compute, memory, total float64) {
	x := float64(ctx)
	af := d.pairFLOPs * x
	ab := (x+d.tokens)*d.kvElems*d.kvBytes + d.qo
	c, m := af/d.attnFLOPs*1e6, ab/d.bw*1e6
	mx := m
	if c > m { // math.Max for the non-negative finite values these are
		mx = c
	}
	roof := d.roof0 + mx*d.layers
	roof += d.elem
	return d.compute0 + c*d.layers, d.memory0 + m*d.layers + d.elem, roof + d.comm + d.over
}

// DecodeTerms returns f with f(ctx) == Terms(&Batch{DecodeSeqs: seqs,
// DecodeCtx: ctx}) without pipeline parallelism, by Terms' own code with
// the GEMMs costed once (the reference DecodeCost is checked against).
func (r *Roofline) DecodeTerms(seqs int) func(ctx int64) Terms {
	b := latency.Batch{DecodeSeqs: seqs}
	T := float64(b.PrefillTokens) + float64(b.DecodeSeqs)
	if T <= 0 {
		return func(int64) Terms { return Terms{} }
	}
	var base Terms
	r.weights(&base, &b, T)
	return func(ctx int64) Terms {
		t := base
		bc := latency.Batch{DecodeSeqs: seqs, DecodeCtx: ctx}
		r.attention(&t, &bc, T)
		r.tail(&t, T)
		return t
	}
}

// DecodeRamp implements latency.Leaper: the step time is non-decreasing in
// the context, as every term of At is.
func (r *Roofline) DecodeRamp(seqs int) latency.Ramp {
	if seqs <= 0 {
		return nil
	}
	if r.par != nil && r.par.PP > 1 {
		// A pipelined step costs micro-batches of ⌈ctx/m⌉ (parallel.go):
		// still non-decreasing in ctx, priced by StepTime itself.
		return func(ctx int64) int64 {
			return r.StepTime(&latency.Batch{DecodeSeqs: seqs, DecodeCtx: ctx})
		}
	}
	d := r.DecodeCost(seqs)
	return func(ctx int64) int64 {
		_, _, t := d.At(ctx)
		return stepUS(t)
	}
}
