package measure

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/blis-sim/blis/lib/latency"
)

// StepSample is one measured engine step: its composition and duration.
type StepSample struct {
	Source string // file:line
	Batch  latency.Batch
	US     float64
}

// StepFilter selects Splitwise rows; empty fields and TP 0 match anything.
type StepFilter struct {
	Model, GPU string
	TP         int
}

// StepStats counts the rows read and skipped.
type StepStats struct {
	Format   string
	Rows     int
	Filtered int
	Kept     int
}

// generic step CSV columns (one row per step, times in µs).
var genericStepCols = []string{"prefill_seqs", "prefill_tokens", "prefill_ctx", "decode_seqs", "decode_ctx", "step_us"}

// ReadStepTimes reads step-level timings. Two layouts are recognised by their
// header: Splitwise's perf_model.csv (model, hardware, prompt_size,
// batch_size, token_size, prompt_time, token_time in ms, tensor_parallel),
// giving one prefill step and one mean decode step per row; and the generic
// step CSV (prefill_seqs, prefill_tokens, prefill_ctx, [prefill_attn],
// decode_seqs, decode_ctx, step_us), one row per step.
func ReadStepTimes(path string, r io.Reader, f StepFilter) ([]StepSample, StepStats, error) {
	t, err := newCSVTable(path, r)
	if err != nil {
		return nil, StepStats{}, err
	}
	switch {
	case t.has("prompt_time") && t.has("token_time"):
		return readSplitwise(t, f)
	case t.has("step_us"):
		for _, c := range genericStepCols {
			if !t.has(c) {
				return nil, StepStats{}, &InputError{Path: path, Line: 1, Field: c, Msg: "expected this column in a step CSV (" + strings.Join(genericStepCols, ",") + ")"}
			}
		}
		return readGenericSteps(t)
	}
	return nil, StepStats{}, &InputError{Path: path, Line: 1, Msg: "unrecognised step-time header: expected Splitwise perf_model.csv (prompt_time, token_time) or a step CSV (" + strings.Join(genericStepCols, ",") + ")"}
}

func readSplitwise(t *csvTable, f StepFilter) ([]StepSample, StepStats, error) {
	st := StepStats{Format: "splitwise"}
	for _, c := range []string{"model", "hardware", "prompt_size", "batch_size", "token_size", "tensor_parallel"} {
		if !t.has(c) {
			return nil, st, &InputError{Path: t.path, Line: 1, Field: c, Msg: "expected this column in a Splitwise perf_model.csv"}
		}
	}
	var out []StepSample
	for {
		if err := t.next(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, st, err
		}
		st.Rows++
		if !MatchModel(f.Model, t.str("model")) || !MatchGPU(f.GPU, t.str("hardware")) {
			st.Filtered++
			continue
		}
		tp, err := t.count("tensor_parallel", true)
		if err != nil {
			return nil, st, err
		}
		if f.TP != 0 && tp != f.TP {
			st.Filtered++
			continue
		}
		ps, err := t.count("prompt_size", true)
		if err != nil {
			return nil, st, err
		}
		bs, err := t.count("batch_size", true)
		if err != nil {
			return nil, st, err
		}
		ts, err := t.count("token_size", true)
		if err != nil {
			return nil, st, err
		}
		pt, err := t.float("prompt_time", true)
		if err != nil {
			return nil, st, err
		}
		tt, err := t.float("token_time", true)
		if err != nil {
			return nil, st, err
		}
		for _, f := range []struct {
			name string
			ms   float64
		}{{"prompt_time", pt}, {"token_time", tt}} {
			if err := stepUnits(t, f.name, f.ms*1000, "milliseconds (0.01 ms to 1 h per step)", f.ms, "seconds", "microseconds"); err != nil {
				return nil, st, err
			}
		}
		src := fmt.Sprintf("%s:%d", t.path, t.line)
		p64, b64 := int64(ps), int64(bs)
		// Static batching: bs prompts prefilled together in one step.
		out = append(out, StepSample{Source: src + " prefill", US: pt * 1000, Batch: latency.Batch{
			PrefillSeqs: bs, PrefillTokens: b64 * p64, PrefillAttn: b64 * p64 * (p64 + 1) / 2}})
		// token_time is the mean decode iteration over token_size steps whose
		// context grows from ps to ps+ts: use the mean context.
		out = append(out, StepSample{Source: src + " decode", US: tt * 1000, Batch: latency.Batch{
			DecodeSeqs: bs, DecodeCtx: b64 * (p64 + int64(ts)/2)}})
		st.Kept++
	}
	return out, st, nil
}

func readGenericSteps(t *csvTable) ([]StepSample, StepStats, error) {
	st := StepStats{Format: "steps"}
	var out []StepSample
	for {
		if err := t.next(); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, st, err
		}
		st.Rows++
		var b latency.Batch
		var err error
		if b.PrefillSeqs, err = t.count("prefill_seqs", false); err != nil {
			return nil, st, err
		}
		var v int
		if v, err = t.count("prefill_tokens", false); err != nil {
			return nil, st, err
		}
		b.PrefillTokens = int64(v)
		if v, err = t.count("prefill_ctx", false); err != nil {
			return nil, st, err
		}
		b.PrefillCtx = int64(v)
		if b.DecodeSeqs, err = t.count("decode_seqs", false); err != nil {
			return nil, st, err
		}
		if v, err = t.count("decode_ctx", false); err != nil {
			return nil, st, err
		}
		b.DecodeCtx = int64(v)
		if t.has("prefill_attn") && t.str("prefill_attn") != "" {
			a, err := t.float("prefill_attn", false)
			if err != nil {
				return nil, st, err
			}
			b.PrefillAttn = int64(a)
		} else if b.PrefillSeqs > 0 {
			// Chunks of equal length: Σ c·(ctx + (c+1)/2).
			c := b.PrefillTokens / int64(b.PrefillSeqs)
			b.PrefillAttn = b.PrefillTokens*(b.PrefillCtx/int64(b.PrefillSeqs)) + b.PrefillTokens*(c+1)/2
		}
		if b.Size() == 0 {
			return nil, st, t.errf("prefill_seqs", "expected a step with at least one request, found prefill_seqs=0 and decode_seqs=0")
		}
		if b.PrefillSeqs > 0 && b.PrefillTokens < int64(b.PrefillSeqs) {
			return nil, st, t.errf("prefill_tokens", "expected at least one token per prefill sequence, found %d tokens for %d sequences", b.PrefillTokens, b.PrefillSeqs)
		}
		us, err := t.float("step_us", true)
		if err != nil {
			return nil, st, err
		}
		if err := stepUnits(t, "step_us", us, "microseconds (10 µs to 1 h per step)", us, "milliseconds", "nanoseconds"); err != nil {
			return nil, st, err
		}
		out = append(out, StepSample{Source: fmt.Sprintf("%s:%d", t.path, t.line), Batch: b, US: us})
		st.Kept++
	}
	return out, st, nil
}

// Bounds on one engine step: below 10 µs is less than a forward pass's
// kernel launches, above an hour is no step. Outside them the column is in
// other units (ms written into step_us gives "1.7"), which a fit would
// silently turn into coefficients 1000× off.
const minStepUS, maxStepUS = 10, 3.6e9

// stepUnits checks a step time of us µs read as found from column name.
func stepUnits(t *csvTable, name string, us float64, expected string, found float64, ifSmall, ifLarge string) error {
	switch {
	case us < minStepUS:
		return t.errf(name, "expected %s, found %g (inconsistent units: %s?)", expected, found, ifSmall)
	case us > maxStepUS:
		return t.errf(name, "expected %s, found %g (inconsistent units: %s?)", expected, found, ifLarge)
	}
	return nil
}
