package roofline

import "github.com/blis-sim/blis/lib/latency"

// DecodeTerms returns f with f(ctx) == Terms(&Batch{DecodeSeqs: seqs,
// DecodeCtx: ctx}) exactly, for the engine's leaping (latency.Leaper): a
// decode-only batch's GEMMs depend on its size alone, so they are costed
// once; each call adds the attention (the one term that reads the
// context) and the tail, in Terms' order of operations. Every term is a
// non-negative combination of non-decreasing functions of ctx, so f's
// fields are non-decreasing in ctx.
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

// DecodeRamp implements latency.Leaper.
func (r *Roofline) DecodeRamp(seqs int) latency.Ramp {
	terms := r.DecodeTerms(seqs)
	return func(ctx int64) int64 { return stepUS(terms(ctx).TotalUS) }
}
