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

// hostModel is a model with 300 µs of CPU work per step.
type hostModel struct{ Linear }

func (hostModel) HostStepUS(*Batch) int64 { return 300 }
func (hostModel) HostTimed() bool         { return true }

// WithAlpha replaces only the request-level overheads: the step, the name
// and the engine's CPU work (seen through WithHost) stay the model's.
func TestWithAlpha(t *testing.T) {
	a := Alpha{QueueBase: 5000, QueuePerInputToken: 2, PerOutputToken: 100}
	b := &Batch{DecodeSeqs: 4}
	for _, tc := range []struct {
		name        string
		m           Model
		sync, async int64
		wantHost    bool
	}{
		{"plain model", &Linear{Beta0: 1000, A: Alpha{QueueBase: 7}, Label: "m"}, 1000, 1000, false},
		{"model with CPU work", &hostModel{Linear{Beta0: 1000, A: Alpha{QueueBase: 7}, Label: "m"}}, 1300, 1000, true},
	} {
		w := WithAlpha(tc.m, a)
		if w.Alpha() != a || tc.m.Alpha() == a {
			t.Errorf("%s: Alpha = %+v, want %+v (and the model's own unchanged)", tc.name, w.Alpha(), a)
		}
		if w.Name() != "m" || w.StepTime(b) != 1000 {
			t.Errorf("%s: name %q step %d, want the model's", tc.name, w.Name(), w.StepTime(b))
		}
		if _, ok := w.(HostTimer); ok != tc.wantHost {
			t.Errorf("%s: HostTimer visible %v, want %v", tc.name, ok, tc.wantHost)
		}
		if s, as := WithHost(w, false).StepTime(b), WithHost(w, true).StepTime(b); s != tc.sync || as != tc.async {
			t.Errorf("%s: sync %d async %d, want %d %d", tc.name, s, as, tc.sync, tc.async)
		}
		if got := w.Alpha().QueueDelay(100); got != 5200 {
			t.Errorf("%s: QueueDelay(100) = %d, want 5200", tc.name, got)
		}
	}
}

// WindowPairs is a chunk's query–key pairs on a sliding-window layer:
// checked against the count position by position.
func TestWindowPairs(t *testing.T) {
	for _, w := range []int64{1, 2, 7, 128, 4096} {
		for _, ctx := range []int64{0, 1, 5, 126, 127, 128, 129, 4000, 9000} {
			for _, n := range []int64{0, 1, 2, 3, 64, 127, 128, 129, 1000, 8192} {
				var want int64
				for p := ctx; p < ctx+n; p++ {
					want += min(p+1, w)
				}
				if got := WindowPairs(ctx, n, w); got != want {
					t.Fatalf("WindowPairs(%d, %d, %d) = %d, counted %d", ctx, n, w, got, want)
				}
			}
		}
	}
}

// winModel is a model with a sliding window and nothing else.
type winModel struct {
	Model
	w int32
}

func (m winModel) Window() int32 { return m.w }

// The wrappers the engine puts around a model keep its window visible, so
// the scheduler fills the exact windowed sums (not the batch's mean).
func TestWindowThroughWrappers(t *testing.T) {
	m := winModel{w: 128}
	for _, tc := range []struct {
		name string
		m    Model
	}{
		{"none", m},
		{"lora", &LoRA{Base: m}},
		{"speculative", &Speculative{Target: m}},
		{"alpha", WithAlpha(m, Alpha{QueueBase: 1})},
	} {
		if got := WindowOf(tc.m); got != 128 {
			t.Errorf("%s: WindowOf = %d, want 128", tc.name, got)
		}
	}
	if got := WindowOf(&LoRA{Base: winModel{}}); got != 0 {
		t.Errorf("no window: WindowOf = %d, want 0", got)
	}
}
