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
	eachRoofline(t, []int{1, 2, 4, 8}, func(name, gname string, tp int, r *Roofline) {
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
	})
	if n < 1000 {
		t.Fatalf("only %d points checked", n)
	}
}

// The ramp's straight-line shortcut answers only where it agrees with At
// rounded: checked at dense and random contexts on every catalogue model
// and GPU, and it must answer almost everywhere (else it buys nothing).
func TestDecodeLineExact(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	checked, declined := 0, 0
	eachRoofline(t, []int{1, 2, 8}, func(name, gname string, tp int, r *Roofline) {
		for _, seqs := range []int{1, 2, 5, 1 + rnd.IntN(64), 1 + rnd.IntN(1024)} {
			d := r.DecodeCost(seqs)
			l := d.line()
			ctx := int64(0)
			for j := 0; j < 600; j++ {
				if j < 300 {
					ctx += int64(seqs) // consecutive steps, as a span prices them
				} else {
					ctx += int64(rnd.IntN(20000 * seqs))
				}
				_, _, tot := d.At(ctx)
				want := stepUS(tot)
				checked++
				got, ok := l.stepUS(ctx)
				if !ok {
					declined++
					continue
				}
				if got != want {
					t.Fatalf("%s on %s tp%d, %d seqs, ctx %d: line %d µs, At %d µs (%.17g)", name, gname, tp, seqs, ctx, got, want, tot)
				}
			}
		}
	})
	if checked < 10000 || declined*1000 > checked {
		t.Fatalf("line declined %d of %d points", declined, checked)
	}
	t.Logf("line answered %d of %d points", checked-declined, checked)
}

// eachRoofline calls f with every catalogue model on every catalogue GPU at
// each of tps that divides its heads (TP > 1 only on GPUs with a link) and
// that fits.
func eachRoofline(t *testing.T, tps []int, f func(name, gname string, tp int, r *Roofline)) {
	t.Helper()
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
			for _, tp := range tps {
				if tp > 1 && (a.Heads%tp != 0 || !(g.LinkGBps > 0)) {
					continue
				}
				if r, err := New(a, g, tp); err == nil { // (else it does not fit: no model to leap)
					f(name, gname, tp, r)
				}
			}
		}
	}
}
