package autoscale

import (
	"strings"
	"testing"
)

// linearPerf is a hand-checkable profile: a prefill of n tokens takes
// 1000 + 10n µs, a decode step of b sequences of ctx tokens 5000 + 100b +
// 0.01·b·ctx µs, at most 256 sequences.
type linearPerf struct{}

func (linearPerf) PrefillUS(n float64) float64 { return 1000 + 10*n }
func (linearPerf) DecodeStepUS(b int, ctx float64) float64 {
	return 5000 + 100*float64(b) + 0.01*float64(b)*ctx
}
func (linearPerf) MaxBatch(float64) int { return 256 }

// TestPlanner checks Dynamo's formulas by hand (planner.go).
func TestPlanner(t *testing.T) {
	pl := &Planner{ITLUS: 12000}
	view := func(role string, m Metrics) *PoolView {
		return &PoolView{Role: role, Current: 4, Ready: 4, Min: 0, Max: 100, Metrics: m, Perf: linearPerf{}}
	}
	for _, tc := range []struct {
		name   string
		p      *PoolView
		want   int
		reason string
	}{
		// TTFT₀ = 1000 + 10·1000 = 11,000 µs: 1000 / 0.011 = 90,909
		// tokens/s per replica; 200 req/s × 1000 tokens = 200,000 tokens/s.
		// Observed 22,000 µs: c = 2, min(1, c) = 1: ⌈200,000 / 90,909⌉ = 3.
		{"prefill, queueing", view("prefill", Metrics{RequestRate: 200, InputTokensMean: 1000, OutputTokensMean: 200, TTFTMeanUS: 22000}), 3, "= 3"},
		// Observed 5,500 µs: c = 0.5: ⌈100,000 / 90,909⌉ = 2.
		{"prefill, faster than the profile", view("prefill", Metrics{RequestRate: 200, InputTokensMean: 1000, OutputTokensMean: 200, TTFTMeanUS: 5500}), 2, "= 2"},
		// ctx = 1000 + 200/2 = 1100: a step of b is 5000 + 111b µs. No
		// observation: ITL′ = 12,000, b = ⌊7000 / 111⌋ = 63, step 11,993 µs,
		// 63 / 0.011993 = 5,253 tokens/s; 200 × 200 = 40,000: ⌈7.6⌉ = 8.
		{"decode, no correction", view("decode", Metrics{RequestRate: 200, InputTokensMean: 1000, OutputTokensMean: 200}), 8, "= 8"},
		// Concurrency 200 × 3 s / 4 = 150: expected ITL 5000 + 111·150 =
		// 21,650 µs; observed 12,000: c = 0.554, ITL′ = 21,650, b = 150,
		// 150 / 0.02165 = 6,928 tokens/s: ⌈5.77⌉ = 6.
		{"decode, corrected", view("decode", Metrics{RequestRate: 200, InputTokensMean: 1000, OutputTokensMean: 200, ITLMeanUS: 12000, DurationMeanUS: 3e6}), 6, "= 6"},
		{"no traffic", view("decode", Metrics{}), 4, "no request arrived"},
		{"from zero", &PoolView{Role: "decode", Pending: 2, Perf: linearPerf{}}, 1, "2 pending at 0 replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pl.Recommend(tc.p, nil)
			if r.Desired != tc.want || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("got %d (%s), want %d (%s)", r.Desired, r.Reason, tc.want, tc.reason)
			}
		})
	}
}
