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
	qo, bw                   float64 // query/output bytes of the batch; achieved B/s
	lf, lw                   float64 // full and sliding-window layers
	seqsW                    int64   // seqs·(W−1): a windowed layer's context, past the window
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
	d := DecodeCost{roof0: base.RoofUS, compute0: base.ComputeUS, memory0: base.MemoryUS,
		elem: tail.RoofUS, comm: full.CommUS, over: full.OverheadUS,
		pairFLOPs: r.attnPairFLOPsD, attnFLOPs: r.attnFLOPs, tokens: T, kvElems: r.kvLayerRank, kvBytes: r.kvb,
		qo: T * r.qoElemsRank * r.ab, bw: r.bw, lf: float64(r.A.Layers)}
	if r.lw > 0 {
		d.lf, d.lw, d.seqsW = r.lf, r.lw, int64(seqs)*int64(r.A.Window-1)
	}
	return d
}

// At is Terms(&Batch{DecodeSeqs: seqs, DecodeCtx: ctx}).ComputeUS,
// MemoryUS and TotalUS exactly: attention's formulas with the prefill
// terms at zero (attention's own code is the reference: keep the two in
// step; TestDecodeCostExact checks every catalogue model and GPU). The
// sliding-window layers read min(ctx, seqs·(W−1)) cached tokens: the
// batch's windowed sum while its requests are all on one side of the
// window, which the scheduler keeps to for a span (sched/window.go).
func (d *DecodeCost) At(ctx int64) (compute, memory, total float64) {
	compute, memory, roof := d.compute0, d.memory0, d.roof0
	if d.lf > 0 {
		d.layers(float64(ctx), d.lf, &compute, &memory, &roof)
	}
	if d.lw > 0 {
		d.layers(float64(min(ctx, d.seqsW)), d.lw, &compute, &memory, &roof)
	}
	roof += d.elem
	return compute, memory + d.elem, roof + d.comm + d.over
}

// layers adds L decode attention layers over x cached tokens in all.
func (d *DecodeCost) layers(x, L float64, compute, memory, roof *float64) {
	af := d.pairFLOPs * x
	ab := (x+d.tokens)*d.kvElems*d.kvBytes + d.qo
	c, m := af/d.attnFLOPs*1e6, ab/d.bw*1e6
	mx := m
	if c > m { // math.Max for the non-negative finite values these are
		mx = c
	}
	*compute += c * L
	*memory += m * L
	*roof += mx * L
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
	l := d.line()
	return func(ctx int64) int64 {
		if us, ok := l.stepUS(ctx); ok {
			return us
		}
		_, _, t := d.At(ctx)
		return stepUS(t)
	}
}

// decodeLine is At's total as the straight lines it is in exact
// arithmetic: a layer's compute time kc·x and memory time km·x + m0 over x
// cached tokens. It skips At's two divisions a layer, and is exact where
// it answers: its total and At's differ by rounding alone, at most ~30
// roundings of the total (every term is non-negative, so nothing cancels),
// and a total that far from a rounding boundary rounds to the same µs.
type decodeLine struct {
	base       float64 // the context-free terms: GEMMs, tail, all-reduces, overheads
	kc, km, m0 float64
	lf, lw     float64
	seqsW      int64
}

func (d *DecodeCost) line() decodeLine {
	return decodeLine{base: d.roof0 + d.elem + d.comm + d.over,
		kc: d.pairFLOPs / d.attnFLOPs * 1e6, km: d.kvElems * d.kvBytes / d.bw * 1e6,
		m0: (d.tokens*d.kvElems*d.kvBytes + d.qo) / d.bw * 1e6, lf: d.lf, lw: d.lw, seqsW: d.seqsW}
}

// lineSlack bounds |line − At| relative to the total: 2^-53 a rounding
// times ~30 roundings is 3.3e-15; this is 300 times that.
const lineSlack = 1e-12

// stepUS is stepUS(At(ctx).total), or false where the line cannot tell
// (a total within its slack of a rounding boundary, or out of range).
func (l *decodeLine) stepUS(ctx int64) (int64, bool) {
	t := l.base
	if l.lf > 0 {
		t += l.lf * l.layer(float64(ctx))
	}
	if l.lw > 0 {
		t += l.lw * l.layer(float64(min(ctx, l.seqsW)))
	}
	if !(t >= 1 && t < MaxStepUS-1) {
		return 0, false
	}
	y := t + 0.5
	n := int64(y) // y is positive: truncation is its floor
	if f, e := y-float64(n), lineSlack*t+1e-9; f < e || f > 1-e {
		return 0, false
	}
	return n, true
}

// layer is a layer's roofline over x cached tokens (max of non-negative
// finite values: no NaN or signed-zero cases to handle).
func (l *decodeLine) layer(x float64) float64 {
	c, m := l.kc*x, l.km*x+l.m0
	if c > m {
		return c
	}
	return m
}
