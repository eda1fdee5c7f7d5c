package autoscale

import (
	"math"
	"reflect"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/rng"
)

// seqPolicy recommends a fixed sequence.
type seqPolicy struct{ recs []int }

func (p *seqPolicy) Recommend(*PoolView, []PoolView) Recommendation {
	r := p.recs[0]
	p.recs = p.recs[1:]
	return Recommendation{Desired: r, Reason: "seq"}
}

// Kubernetes' stabilisation, by hand: evaluations every 15 s with a
// 60 s down window and a 30 s up window.
func TestStabilization(t *testing.T) {
	p := &seqPolicy{recs: []int{2, 5, 5, 5, 1, 1, 1, 1, 1, 6, 1}}
	c := NewController(p, 30e6, 60e6)
	cur := 2
	var got []int
	for k := 0; k < 11; k++ {
		v := &PoolView{NowUS: int64(k) * 15e6, Current: cur, Min: 1, Max: 10}
		cur = c.Evaluate(v, nil).Target
		got = append(got, cur)
	}
	// 15 s: the up window (−15 s, 15 s] holds 2 and 5: lowest 2. 30 s:
	// (0, 30 s] holds 5, 5: up to 5. From 60 s the policy says 1, but the
	// down window (t − 60 s, t] still holds a 5 until 105 s, whose window
	// (45 s, 105 s] holds only 1s: down to 1. At 135 s the policy says 6,
	// but the up window (105 s, 135 s] also holds 1 from 120 s: stay at 1.
	want := []int{2, 2, 5, 5, 5, 5, 5, 1, 1, 1, 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
}

func TestHPA(t *testing.T) {
	h := &HPA{Metric: "queue_depth", Target: 8, Tolerance: 0.1}
	for _, tc := range []struct {
		cur, ready int
		q          float64
		want       int
	}{
		{2, 2, 12, 3},  // ceil(2 × 12/8)
		{2, 2, 8.5, 2}, // within tolerance
		{4, 2, 16, 4},  // two not ready count as 0: 16·2/4 = 8 per replica
		{4, 4, 1, 1},
	} {
		v := &PoolView{Current: tc.cur, Ready: tc.ready, Metrics: Metrics{QueueDepth: tc.q}}
		if got := h.Recommend(v, nil).Desired; got != tc.want {
			t.Errorf("current %d ready %d queue %g: %d, want %d", tc.cur, tc.ready, tc.q, got, tc.want)
		}
	}
}

func TestSLOPolicy(t *testing.T) {
	s := &SLO{Target: 0.9, LowUtilization: 0.5}
	v := &PoolView{Current: 4, Ready: 4, Pending: 3, Metrics: Metrics{SLOAttainment: 0.6, Utilization: 0.9}}
	if got := s.Recommend(v, nil).Desired; got != 6 { // ceil(4 × (1 + 0.3/0.9)) = ceil(5.33)
		t.Fatalf("got %d, want 6", got)
	}
	v.Metrics = Metrics{SLOAttainment: 0.99, Utilization: 0.3} // 0.3·4/3 = 0.4 < 0.5
	if got := s.Recommend(v, nil).Desired; got != 3 {
		t.Fatalf("got %d, want 3", got)
	}
	v.Metrics = Metrics{SLOAttainment: math.NaN(), Utilization: 0.3}
	if got := s.Recommend(v, nil).Desired; got != 4 {
		t.Fatalf("no signal: got %d, want 4", got)
	}
}

func TestWarmFactor(t *testing.T) {
	for _, tc := range []struct {
		curve    string
		at       int64
		want     float64
		approxOK bool
	}{
		{"linear", 0, 3, false}, {"linear", 5, 2, false}, {"linear", 10, 1, false},
		{"step", 9, 3, false}, {"step", 10, 1, false},
		{"exponential", 0, 3, false}, {"exponential", 5, 1 + 2*math.Exp(-2.5), true},
	} {
		got := WarmFactor(tc.curve, 3, tc.at, 10)
		if math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s at %d: %g, want %g", tc.curve, tc.at, got, tc.want)
		}
	}
}

func TestDelayDeterministicAndInRange(t *testing.T) {
	for _, d := range []config.Distribution{
		{Dist: "constant", Value: config.Duration(60e9)},
		{Dist: "uniform", Min: config.Duration(30e9), Max: config.Duration(90e9)},
		{Dist: "normal", Mean: config.Duration(60e9), Stddev: config.Duration(10e9)},
		{Dist: "lognormal", Median: config.Duration(60e9), Sigma: 0.5},
	} {
		a, b := NewDelay(d, rng.PCG(1, "x")), NewDelay(d, rng.PCG(1, "x"))
		sum := 0.0
		for i := 0; i < 2000; i++ {
			x, y := a.Draw(), b.Draw()
			if x != y || x < 0 {
				t.Fatalf("%s: draws %d and %d", d.Dist, x, y)
			}
			if d.Dist == "uniform" && (x < 30e6 || x > 90e6) {
				t.Fatalf("uniform draw %d out of range", x)
			}
			sum += float64(x)
		}
		want := 60e6
		if d.Dist == "lognormal" {
			want = 60e6 * math.Exp(0.5*0.5/2) // e^(σ²/2) above the median
		}
		if m := sum / 2000; math.Abs(m/want-1) > 0.05 {
			t.Fatalf("%s: mean %g µs, want %g ± 5%%", d.Dist, m, want)
		}
	}
}

func TestOscillations(t *testing.T) {
	acts := []Action{{0, true}, {10, true}, {100, false}, {200, true}, {1000, false}, {5000, true}}
	got := Oscillations(acts, 300)
	want := []Oscillation{{StartUS: 10, EndUS: 200, FirstUp: true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := Oscillations(acts, 10); len(got) != 0 {
		t.Fatalf("window 10: %+v", got)
	}
}
