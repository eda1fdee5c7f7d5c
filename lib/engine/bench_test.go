package engine

import (
	"fmt"
	"math"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// benchWorkload is the benchmark: Poisson at rate req/s, input and
// output normal(512, 256) clamped to [2, 7000].
func benchWorkload(n int, rate float64) []trace.Request {
	arr, lens := rng.New(1, "arrivals"), rng.New(1, "lengths")
	clamp := func(x float64) int32 { return int32(min(max(math.Round(x), 2), 7000)) }
	reqs := make([]trace.Request, n)
	t := 0.0
	for i := range reqs {
		t += arr.ExpFloat64() / rate
		reqs[i] = req(fmt.Sprint("r", i), int64(t*1e6), clamp(512+256*lens.NormFloat64()), clamp(512+256*lens.NormFloat64()))
	}
	return reqs
}

type nullSink struct{ n int }

func (s *nullSink) Write(*trace.Result) error { s.n++; return nil }

func benchRun(b *testing.B, n int, linear bool) {
	cfg := config.Default()
	cfg.Replicas = 8
	if linear {
		// Published-style H100 coefficients magnitude; KV as the roofline computes it.
		cfg.Latency = config.Latency{Mode: "linear", Beta: []float64{6000, 0.05, 30}}
	}
	model, _, err := Prepare(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchWorkload(n, 96)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum, err := Run(cfg, model, &chunkSource{reqs: reqs, n: 32768}, &nullSink{}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Completed != int64(n) {
			b.Fatalf("completed %d of %d", sum.Completed, n)
		}
		b.ReportMetric(float64(sum.Events), "events/op")
	}
}

func BenchmarkRun20kRoofline(b *testing.B) { benchRun(b, 20000, false) }
func BenchmarkRun20kLinear(b *testing.B)   { benchRun(b, 20000, true) }

// BenchmarkRun100kRoofline is the benchmark in process (no Arrow IO).
func BenchmarkRun100kRoofline(b *testing.B) { benchRun(b, 100000, false) }

// BenchmarkRunSmall is the calibration use: a small closed-loop batch on one
// replica, run thousands of times.
func BenchmarkRunSmall(b *testing.B) {
	cfg := testConfig()
	cfg.Engine.KVBlocks = 28407
	model := testModel(cfg)
	var reqs []trace.Request
	for c := 0; c < 8; c++ { // 8 chains of 10 requests
		prev := ""
		for i := 0; i < 10; i++ {
			r := req(fmt.Sprint("c", c, "-", i), 0, 512, 64)
			if prev != "" {
				r.ArrivalUS, r.DependsOn = trace.Null, []string{prev}
			}
			prev = r.ID
			reqs = append(reqs, r)
		}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Run(cfg, model, SliceSource(reqs), &nullSink{}, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
