// Package fitted is the fitted step-time model: step time in µs is a
// non-negative combination of named features of the batch,
// Σ βᵢ·featureᵢ(batch), plus alpha terms outside the step. The published
// BLIS form β0 + β1·prefill tokens + β2·decode tokens is the feature set
// [const, prefill_tokens, decode_tokens]. The fitter (lib/fit) and the
// simulator both evaluate features through Evaluator so they agree exactly.
package fitted

import (
	"fmt"
	"strings"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

// Feature names. Units in the comment are the unit of the feature; its β is
// µs per that unit.
const (
	Const         = "const"          // 1 per step
	PrefillTokens = "prefill_tokens" // prompt tokens computed this step
	DecodeTokens  = "decode_tokens"  // decoding requests (one token each)
	BatchSize     = "batch_size"     // requests in the step (per-request overhead)
	PrefillSeqs   = "prefill_seqs"   // requests with a prefill chunk
	PrefillAttn   = "prefill_attn"   // causal query–key pairs of prefill chunks
	PrefillCtx    = "prefill_ctx"    // cached tokens before the chunks
	DecodeCtx     = "decode_ctx"     // Σ KV length of decoding requests
	Layers        = "layers"         // number of layers (per-layer overhead per step)
	RoofCompute   = "roofline_compute_us"
	RoofMemory    = "roofline_memory_us"
	RoofComm      = "roofline_comm_us"
	Roof          = "roofline_us" // full roofline step time incl. its overheads
)

// FeatureDoc describes every known feature, in a stable order.
var FeatureDoc = []struct{ Name, Doc string }{
	{Const, "1 per step: fixed per-step cost (scheduling, sampling, launch)"},
	{PrefillTokens, "prompt tokens computed this step"},
	{DecodeTokens, "decoding requests this step (one token each)"},
	{BatchSize, "requests in the step: per-request overhead"},
	{PrefillSeqs, "requests computing a prefill chunk"},
	{PrefillAttn, "causal query-key pairs of the prefill chunks"},
	{PrefillCtx, "tokens already cached before the prefill chunks"},
	{DecodeCtx, "Σ KV length of the decoding requests"},
	{Layers, "model layers: a per-layer overhead paid every step"},
	{RoofCompute, "roofline compute time, µs (needs model and GPU)"},
	{RoofMemory, "roofline memory time, µs (needs model and GPU)"},
	{RoofComm, "roofline all-reduce time, µs (needs model, GPU, TP>1)"},
	{Roof, "whole roofline step time, µs (needs model and GPU)"},
}

// NeedsRoofline reports whether a feature is computed by the roofline.
func NeedsRoofline(name string) bool { return strings.HasPrefix(name, "roofline_") }

// Evaluator computes a fixed feature set for batches.
type Evaluator struct {
	names  []string
	ids    []int
	roof   *roofline.Roofline
	layers float64
}

// NewEvaluator checks the names and binds the roofline features to rf
// (which may be nil when no roofline feature is used).
func NewEvaluator(names []string, rf *roofline.Roofline) (*Evaluator, error) {
	e := &Evaluator{names: append([]string(nil), names...), roof: rf}
	if rf != nil {
		e.layers = float64(rf.A.Layers)
	}
	seen := map[string]bool{}
	for _, n := range names {
		id := -1
		for i, d := range FeatureDoc {
			if d.Name == n {
				id = i
			}
		}
		if id < 0 {
			known := make([]string, len(FeatureDoc))
			for i, d := range FeatureDoc {
				known[i] = d.Name
			}
			return nil, fmt.Errorf("feature %q: unknown (expected one of %s)", n, strings.Join(known, ", "))
		}
		if seen[n] {
			return nil, fmt.Errorf("feature %q: listed twice", n)
		}
		seen[n] = true
		if (NeedsRoofline(n) || n == Layers) && rf == nil {
			return nil, fmt.Errorf("feature %q: needs the model and GPU (roofline) to evaluate", n)
		}
		e.ids = append(e.ids, id)
	}
	return e, nil
}

// Names returns the feature names in order.
func (e *Evaluator) Names() []string { return append([]string(nil), e.names...) }

// Features writes the feature values of b into out (grown if short) and returns it.
func (e *Evaluator) Features(b *latency.Batch, out []float64) []float64 {
	if cap(out) < len(e.ids) {
		out = make([]float64, len(e.ids))
	}
	out = out[:len(e.ids)]
	var terms roofline.Terms
	haveTerms := false
	for i, id := range e.ids {
		n := FeatureDoc[id].Name
		if NeedsRoofline(n) && !haveTerms {
			terms = e.roof.Terms(b)
			haveTerms = true
		}
		var v float64
		switch n {
		case Const:
			v = 1
		case PrefillTokens:
			v = float64(b.PrefillTokens)
		case DecodeTokens:
			v = float64(b.DecodeSeqs)
		case BatchSize:
			v = float64(b.Size())
		case PrefillSeqs:
			v = float64(b.PrefillSeqs)
		case PrefillAttn:
			v = float64(b.PrefillAttn)
		case PrefillCtx:
			v = float64(b.PrefillCtx)
		case DecodeCtx:
			v = float64(b.DecodeCtx)
		case Layers:
			v = e.layers
		case RoofCompute:
			v = terms.ComputeUS
		case RoofMemory:
			v = terms.MemoryUS
		case RoofComm:
			v = terms.CommUS
		case Roof:
			v = terms.TotalUS
		}
		out[i] = v
	}
	return out
}
