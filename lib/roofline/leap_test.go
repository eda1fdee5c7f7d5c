package roofline

import (
	"math/rand/v2"
	"testing"

	"github.com/blis-sim/blis/lib/latency"
)

// The engine leaps over decode-only steps with DecodeRamp (latency.Leaper)
// and must get exactly what StepTime gives step by step: every catalogue
// model on every catalogue GPU, at TP 1 and the largest TP that divides
// its heads (up to 8), at random batch sizes and contexts.
func TestDecodeCostExact(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	n := 0
	for _, name := range ModelNames() {
		a, err := LoadModel(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, gname := range GPUNames() {
			g, err := LoadGPU(gname)
			if err != nil {
				t.Fatal(err)
			}
			for _, tp := range []int{1, 2, 4, 8} {
				if tp > 1 && (a.Heads%tp != 0 || !(g.LinkGBps > 0)) {
					continue
				}
				r, err := New(a, g, tp)
				if err != nil {
					continue // does not fit or not supported: no model to leap
				}
				for k := 0; k < 6; k++ {
					seqs := 1 + rnd.IntN(300)
					terms, ramp, cost := r.DecodeTerms(seqs), r.DecodeRamp(seqs), r.DecodeCost(seqs)
					prev := int64(0)
					ctx := int64(rnd.IntN(1000))
					for j := 0; j < 40; j++ {
						ctx += int64(rnd.IntN(5000 * seqs))
						b := latency.Batch{DecodeSeqs: seqs, DecodeCtx: ctx}
						if got, want := terms(ctx), r.Terms(&b); got != want {
							t.Fatalf("%s on %s tp%d, %d seqs, ctx %d: DecodeTerms %+v, Terms %+v", name, gname, tp, seqs, ctx, got, want)
						}
						want := r.Terms(&b)
						if c, m, tot := cost.At(ctx); c != want.ComputeUS || m != want.MemoryUS || tot != want.TotalUS {
							t.Fatalf("%s on %s tp%d, %d seqs, ctx %d: DecodeCost %v %v %v, Terms %v %v %v", name, gname, tp, seqs, ctx, c, m, tot, want.ComputeUS, want.MemoryUS, want.TotalUS)
						}
						st := ramp(ctx)
						if st != r.StepTime(&b) || st < prev {
							t.Fatalf("%s on %s tp%d, %d seqs, ctx %d: ramp %d, StepTime %d, previous %d", name, gname, tp, seqs, ctx, st, r.StepTime(&b), prev)
						}
						prev = st
						n++
					}
				}
			}
		}
	}
	if n < 1000 {
		t.Fatalf("only %d points checked", n)
	}
}
