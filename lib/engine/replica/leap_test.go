package replica

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/blis-sim/blis/lib/latency"
)

// price must give every step of a span the ramp's own time, whatever the
// ramp's shape (it guesses run lengths from the run before and searches
// when the guess is off) and however the pricing is split into budgets;
// a remembering ramp is shared by several spans, as a deployment's
// replicas share it, so their runs end where earlier spans found them to
// (sometimes past the span's own end).
func TestSpanPriceIsTheRampStepByStep(t *testing.T) {
	rnd := rand.New(rand.NewPCG(28, 1))
	shapes := []struct {
		name string
		ramp func() latency.Ramp
	}{
		{"constant", func() latency.Ramp { c := 1 + rnd.Int64N(9000); return func(int64) int64 { return c } }},
		{"linear", func() latency.Ramp {
			a, b := 2000+rnd.Float64()*8000, rnd.Float64()*0.5
			return func(x int64) int64 { return int64(a + b*float64(x) + 0.5) }
		}},
		{"steep", func() latency.Ramp {
			a, b := rnd.Float64()*10, 1+rnd.Float64()*20
			return func(x int64) int64 { return int64(a + b*float64(x)) }
		}},
		{"two slopes (compute, then memory bound)", func() latency.Ramp {
			a, b1, b2, k := 3000+rnd.Float64()*100, 0.01+rnd.Float64()*0.05, 0.1+rnd.Float64()*0.3, float64(rnd.Int64N(40000))
			return func(x int64) int64 { return int64(a + math.Max(b1*float64(x), b2*(float64(x)-k)) + 0.5) }
		}},
		{"irregular steps", func() latency.Ramp {
			steps := make([]int64, 64)
			for i := range steps {
				steps[i] = rnd.Int64N(3000)
			}
			return func(x int64) int64 {
				v := int64(100)
				for _, s := range steps {
					if x >= s*s/50 {
						v++
					}
				}
				return v
			}
		}},
		{"zero then positive", func() latency.Ramp {
			k := rnd.Int64N(500)
			return func(x int64) int64 { return max(0, (x-k)/7) }
		}},
	}
	for _, sh := range shapes {
		for trial := 0; trial < 400; trial++ {
			ramp := sh.ramp()
			remember := trial%2 == 0
			m := newMemoRamp(ramp, remember)
			spans := 1
			if remember {
				spans = 6
			}
			for sp := 0; sp < spans; sp++ {
				seqs := 1 + rnd.Int64N(64)
				ctx0 := rnd.Int64N(5000)
				n := 2 + rnd.Int64N(3000)
				start := rnd.Int64N(1e9)
				s := span{n: n, ramp: m, ctx0: ctx0, seqs: seqs, budget: 1 + rnd.IntN(20)}
				d0 := max(ramp(ctx0), 1)
				s.runs = []leapRun{{d0, 1}}
				s.priced, s.end = 1, start+d0
				for s.priced < s.n {
					s.price()
					s.budget = min(2*s.budget, 1<<20)
				}
				// Expand the runs and compare with the ramp step by step.
				end, i := start, int64(0)
				for _, r := range s.runs {
					for k := int64(0); k < r.n; k++ {
						want := max(ramp(ctx0+i*seqs), 1)
						if r.dur != want {
							t.Fatalf("%s, trial %d: step %d priced %d µs, the ramp says %d", sh.name, trial, i, r.dur, want)
						}
						end += want
						i++
					}
				}
				if i != n || end != s.end {
					t.Fatalf("%s, trial %d: %d steps ending at %d priced, want %d ending at %d", sh.name, trial, i, end, n, s.end)
				}
			}
		}
	}
}

// A remembering ramp answers as its ramp does (at least 1) for any context:
// 0, contexts sharing slots, contexts and durations too large to remember.
func TestMemoRampIsItsRamp(t *testing.T) {
	f := func(x int64) int64 {
		switch {
		case x%7 == 0:
			return 0 // at least 1 µs
		case x%11 == 0:
			return 1<<24 + x%5 // too long to remember
		}
		return 100 + x%1000
	}
	rnd := rand.New(rand.NewPCG(28, 2))
	ctxs := []int64{0, 1, 2, 1<<40 - 3, 1<<40 - 2, 1<<40 - 1, 1 << 40, 1 << 62}
	for i := 0; i < 20000; i++ {
		ctxs = append(ctxs, rnd.Int64N(50000))
	}
	for _, remember := range []bool{true, false} {
		m := newMemoRamp(f, remember)
		for pass := 0; pass < 3; pass++ {
			for _, x := range ctxs {
				if got, want := m.at(x), max(f(x), 1); got != want {
					t.Fatalf("remember %v, pass %d: at(%d) = %d, want %d", remember, pass, x, got, want)
				}
			}
		}
	}
}

// SpanRun (a read-ahead's address) is the run CatchUp reads next while a
// span is on, and nil otherwise, including once every run is applied.
func TestSpanRunInBounds(t *testing.T) {
	var p Replica
	if p.SpanRun() != nil {
		t.Fatal("a run without a span")
	}
	p.span.on = true
	p.span.runs = []leapRun{{10, 3}, {11, 2}, {12, 1}}
	for ri := range len(p.span.runs) + 1 {
		p.span.ri = ri
		got := p.SpanRun()
		if ri == len(p.span.runs) {
			if got != nil {
				t.Fatalf("ri %d past the runs: %p", ri, got)
			}
			continue
		}
		if got != unsafe.Pointer(&p.span.runs[ri]) {
			t.Fatalf("ri %d: %p, want %p", ri, got, &p.span.runs[ri])
		}
	}
	p.span.ri, p.span.on = 0, false
	if p.SpanRun() != nil {
		t.Fatal("a run after the span")
	}
}
