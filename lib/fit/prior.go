package fit

import (
	"fmt"
	"github.com/blis-sim/blis/lib/measure"

	"github.com/blis-sim/blis/lib/latency"
)

// PriorShape bounds the batches a prior is fitted over: the engine limits
// and the prompt and output lengths the measurements cover.
type PriorShape struct {
	MaxBatchedTokens int
	MaxSeqs          int
	MaxInput         int
	MaxOutput        int
}

// PriorBatches is a deterministic grid of step compositions an engine with
// these limits produces: decode-only steps of every power-of-two size with
// short to long contexts, prefill-only chunks, and mixed steps.
func PriorBatches(s PriorShape) []latency.Batch {
	var out []latency.Batch
	ctxs := []int64{int64(max(s.MaxInput/4, 16)), int64(max(s.MaxInput, 32)), int64(s.MaxInput + s.MaxOutput)}
	for n := 1; n <= max(s.MaxSeqs, 1); n *= 2 {
		for _, c := range ctxs {
			out = append(out, latency.Batch{DecodeSeqs: n, DecodeCtx: int64(n) * c})
		}
	}
	for chunk := int64(16); chunk <= int64(max(s.MaxBatchedTokens, 16)); chunk *= 2 {
		for _, ctx := range []int64{0, int64(s.MaxInput / 2)} {
			b := latency.Batch{PrefillSeqs: 1, PrefillTokens: chunk, PrefillCtx: ctx, PrefillAttn: chunk * (ctx + (chunk+1)/2)}
			out = append(out, b)
			for n := 4; n <= max(s.MaxSeqs, 1) && int64(n) < chunk; n *= 4 {
				m := b
				m.PrefillTokens -= int64(n)
				m.PrefillAttn = m.PrefillTokens * (ctx + (m.PrefillTokens+1)/2)
				m.DecodeSeqs, m.DecodeCtx = n, int64(n)*ctxs[1]
				out = append(out, m)
			}
		}
	}
	return out
}

// PriorFromModel fits fs to another model's step times over batches (exact
// NNLS on relative error): a warm start from the roofline, or the shape a
// published linear model implies. The steps include the model's CPU work as
// a synchronous engine adds it: a fitted model has no separate host time.
func PriorFromModel(m latency.Model, fs FeatureSet, batches []latency.Batch) ([]float64, error) {
	m = latency.WithHost(m, false)
	samples := make([]measure.StepSample, len(batches))
	for i := range batches {
		samples[i] = measure.StepSample{Source: fmt.Sprintf("prior batch %d", i), Batch: batches[i], US: float64(m.StepTime(&batches[i]))}
	}
	f, err := FitSteps(samples, fs)
	if err != nil {
		return nil, err
	}
	return f.Values, nil
}

// FloorStart lifts every coefficient of a warm start so that its term
// contributes at least 2% of the mean predicted step over batches. Nelder–Mead
// on log-coefficients cannot leave 0 and crawls up from 1e-9; a prior that
// gave a term no weight (the roofline has no constant, say) must not decide
// that the real engine has none.
func FloorStart(fs FeatureSet, start []float64, batches []latency.Batch) []float64 {
	n := len(fs.Names)
	mean := make([]float64, n)
	row := make([]float64, n)
	pred := 0.0
	for i := range batches {
		fs.Eval(&batches[i], row)
		for j := range row {
			mean[j] += row[j] / float64(len(batches))
			pred += start[j] * row[j] / float64(len(batches))
		}
	}
	out := append([]float64(nil), start...)
	for j := range out {
		if mean[j] > 0 {
			if lo := 0.02 * pred / mean[j]; out[j] < lo {
				out[j] = lo
			}
		}
	}
	return out
}
