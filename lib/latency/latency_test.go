package latency

import "testing"

func TestLinearAndAlpha(t *testing.T) {
	m := &Linear{Beta0: 5000, Beta1: 2.5, Beta2: 40, A: Alpha{QueueBase: 1000, QueuePerInputToken: 0.5, PerOutputToken: 30}}
	for _, tc := range []struct {
		name string
		b    Batch
		want int64
	}{
		{"empty batch costs the constant", Batch{}, 5000},
		{"prefill chunk", Batch{PrefillSeqs: 1, PrefillTokens: 1000}, 5000 + 2500},
		{"decode only", Batch{DecodeSeqs: 64, DecodeCtx: 64 * 900}, 5000 + 64*40},
		{"mixed", Batch{PrefillSeqs: 2, PrefillTokens: 300, DecodeSeqs: 10}, 5000 + 750 + 400},
	} {
		if got := m.StepTime(&tc.b); got != tc.want {
			t.Errorf("%s: StepTime = %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := m.Alpha().QueueDelay(2000); got != 2000 {
		t.Errorf("QueueDelay(2000) = %d, want 2000", got)
	}
	if got := (&Linear{}).StepTime(&Batch{}); got != 1 {
		t.Errorf("a zero model must still take 1 µs per step, got %d", got)
	}
	if (&Batch{PrefillSeqs: 2, DecodeSeqs: 3}).Size() != 5 {
		t.Error("Size counts prefill and decode requests")
	}
}

// A huge β must not wrap the int64 step (Go's out-of-range float
// conversion is negative on amd64, which became a 1 µs step).
func TestLinearStepCap(t *testing.T) {
	for _, c := range []struct {
		beta0 float64
		want  int64
	}{{1e17, MaxStepUS}, {1e300, MaxStepUS}, {5, 5}, {-3, 1}} {
		l := &Linear{Beta0: c.beta0}
		if got := l.StepTime(&Batch{DecodeSeqs: 1}); got != c.want {
			t.Errorf("β0 %g: step %d, want %d", c.beta0, got, c.want)
		}
	}
}
