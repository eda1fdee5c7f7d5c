package fit

import "github.com/blis-sim/blis/lib/latency"

// PlainFeatures is the published BLIS form β0 + β1·prefill tokens + β2·decode
// tokens (one token per decoding request).
var PlainFeatures = FeatureSet{
	Names: []string{"const", "prefill_tokens", "decode_tokens"},
	Eval: func(b *latency.Batch, out []float64) {
		out[0] = 1
		out[1] = float64(b.PrefillTokens)
		out[2] = float64(b.DecodeSeqs)
	},
}

// TokenFeatures adds the two context terms that dominate long prompts and
// long generations — causal attention pairs of the prefill chunks and KV
// tokens read by decoding requests — and needs no GPU or model specification.
var TokenFeatures = FeatureSet{
	Names: []string{"const", "prefill_tokens", "prefill_attn", "decode_tokens", "decode_ctx"},
	Eval: func(b *latency.Batch, out []float64) {
		out[0] = 1
		out[1] = float64(b.PrefillTokens)
		out[2] = float64(b.PrefillAttn)
		out[3] = float64(b.DecodeSeqs)
		out[4] = float64(b.DecodeCtx)
	},
}

// Units of the built-in features' coefficients.
var featureUnits = map[string]string{
	"const": "µs/step", "prefill_tokens": "µs/token", "prefill_attn": "µs/(query·key pair)",
	"decode_tokens": "µs/token", "decode_ctx": "µs/KV token read", "prefill_seqs": "µs/request",
}

// Unit returns the unit of a coefficient, "" when unknown.
func Unit(name string) string { return featureUnits[name] }

// Featurizer is what lib/latency/fitted's Evaluator provides; taking the
// interface keeps the fitter on exactly the simulator's feature code.
type Featurizer interface {
	Names() []string
	Features(b *latency.Batch, out []float64) []float64
}

// FromFeaturizer wraps an evaluator as a FeatureSet. The evaluator may keep
// state (a roofline), so one FeatureSet must not be shared by goroutines that
// evaluate concurrently unless the evaluator is safe for that.
func FromFeaturizer(e Featurizer) FeatureSet {
	return FeatureSet{Names: e.Names(), Eval: func(b *latency.Batch, out []float64) { e.Features(b, out[:0]) }}
}
