package latency

import "testing"

// ctxModel is a step that grows with the decode context (as attention
// does): 500 + 0.01 µs per context token, rounded.
type ctxModel struct{ Linear }

func (ctxModel) StepTime(b *Batch) int64 { return 500 + (b.DecodeCtx+50)/100 }

func (m ctxModel) DecodeRamp(seqs int) Ramp {
	return func(ctx int64) int64 { return m.StepTime(&Batch{DecodeSeqs: seqs, DecodeCtx: ctx}) }
}

type ctxHostModel struct{ ctxModel }

// opaque hides its model's ramp.
type opaque struct{ Model }

func (ctxHostModel) HostStepUS(b *Batch) int64 { return 520 + int64(b.DecodeSeqs) }
func (ctxHostModel) HostTimed() bool           { return true }

// A ramp is the model's StepTime on decode-only batches, through every
// wrapper the engine puts around a model (alpha, host work sync and
// async); a model that cannot leap has none.
func TestDecodeRamp(t *testing.T) {
	a := Alpha{QueueBase: 10, PerOutputToken: 3}
	for _, tc := range []struct {
		name string
		m    Model
		leap bool
	}{
		{"linear", &Linear{Beta0: 1000, Beta1: 2, Beta2: 30}, true},
		{"linear with alpha", WithAlpha(&Linear{Beta0: 1000, Beta2: 30}, a), true},
		{"context model", &ctxModel{}, true},
		{"context model with host work", &ctxHostModel{}, true},
		{"host work with alpha", WithAlpha(&ctxHostModel{}, a), true},
		{"no ramp", opaque{&Linear{Beta0: 1000}}, false},
	} {
		for _, async := range []bool{false, true} {
			m := WithHost(tc.m, async)
			for _, seqs := range []int{1, 3, 40, 256} {
				f := RampOf(m, seqs)
				if (f != nil) != tc.leap {
					t.Fatalf("%s: ramp %v, want one %v", tc.name, f != nil, tc.leap)
				}
				if f == nil {
					continue
				}
				for ctx := int64(0); ctx < 100000; ctx += 97 {
					if got, want := f(ctx), m.StepTime(&Batch{DecodeSeqs: seqs, DecodeCtx: ctx}); got != want {
						t.Fatalf("%s async %v: %d seqs, ctx %d: ramp %d, StepTime %d", tc.name, async, seqs, ctx, got, want)
					}
				}
			}
		}
	}
	if RampOf(&Linear{}, 0) != nil {
		t.Error("a ramp for an empty batch")
	}
}
