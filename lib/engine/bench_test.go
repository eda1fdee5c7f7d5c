package engine

import (
	"fmt"
	"math"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/rng"
)

// benchWorkload is the benchmark: Poisson at rate req/s, input and
// output normal(512, 256) clamped to [2, 7000].
func benchWorkload(n int, rate float64) []row.Request {
	arr, lens := rng.New(1, "arrivals"), rng.New(1, "lengths")
	clamp := func(x float64) int32 { return int32(min(max(math.Round(x), 2), 7000)) }
	reqs := make([]row.Request, n)
	t := 0.0
	for i := range reqs {
		t += arr.ExpFloat64() / rate
		reqs[i] = req(fmt.Sprint("r", i), int64(t*1e6), clamp(512+256*lens.NormFloat64()), clamp(512+256*lens.NormFloat64()))
	}
	return reqs
}

type nullSink struct{ n int }

func (s *nullSink) Write(*row.Result) error { s.n++; return nil }

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
	var reqs []row.Request
	for c := 0; c < 8; c++ { // 8 chains of 10 requests
		prev := ""
		for i := 0; i < 10; i++ {
			r := req(fmt.Sprint("c", c, "-", i), 0, 512, 64)
			if prev != "" {
				r.ArrivalUS, r.DependsOn = row.Null, []string{prev}
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

// benchScale runs n requests on replicas replicas with the arrival rate
// scaled so that each replica sees the same load as in the 8-replica
// benchmark (96 req/s over 8): what changes is the router's work per
// decision and the number of replicas the cluster keeps.
func benchScale(b *testing.B, n, replicas int, routing string, prefixes bool) {
	cfg := config.Default()
	cfg.Replicas = replicas
	cfg.Router.Routing = routing
	models, _, err := Prepare(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchWorkload(n, 12*float64(replicas))
	if prefixes {
		addSystemPrompts(reqs)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum, err := Run(cfg, models, &chunkSource{reqs: reqs, n: 32768}, &nullSink{}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Completed != int64(n) {
			b.Fatalf("completed %d of %d", sum.Completed, n)
		}
		b.ReportMetric(float64(sum.Events), "events/op")
	}
}

// addSystemPrompts gives each request one of 32 shared 512-token system
// prompts (32 blocks) followed by blocks of its own.
func addSystemPrompts(reqs []row.Request) {
	g := rng.New(1, "prefixes")
	for i := range reqs {
		r := &reqs[i]
		sys := uint64(g.IntN(32))
		for j := int32(0); j < r.InputTokens/16; j++ {
			h := sys<<40 | uint64(j)
			if j >= 32 {
				h = uint64(i+1)<<20 | uint64(j) | 1<<63
			}
			r.PrefixHashes = append(r.PrefixHashes, h)
		}
	}
}

func BenchmarkScale100k8RoundRobin(b *testing.B) { benchScale(b, 100000, 8, "round-robin", false) }
func BenchmarkScale100k1000RoundRobin(b *testing.B) {
	benchScale(b, 100000, 1000, "round-robin", false)
}
func BenchmarkScale100k8LeastLoaded(b *testing.B) { benchScale(b, 100000, 8, "least-loaded", false) }
func BenchmarkScale100k1000LeastLoaded(b *testing.B) {
	benchScale(b, 100000, 1000, "least-loaded", false)
}
func BenchmarkScale100k8PrefixAffinity(b *testing.B) {
	benchScale(b, 100000, 8, "prefix-affinity", false)
}
func BenchmarkScale100k1000PrefixAffinity(b *testing.B) {
	benchScale(b, 100000, 1000, "prefix-affinity", false)
}

// The same with shared system prompts: the prefix index at work.
func BenchmarkScale100k8PrefixAffinitySys(b *testing.B) {
	benchScale(b, 100000, 8, "prefix-affinity", true)
}
func BenchmarkScale100k1000PrefixAffinitySys(b *testing.B) {
	benchScale(b, 100000, 1000, "prefix-affinity", true)
}

// BenchmarkScale1M1000TwoDeployments is the README's large run: 1,000,000
// requests on 1,000 replicas of two deployments (Llama-3.1-8B on 600 H100s,
// Qwen3-14B on 400 H100s), half the requests for each model.
func BenchmarkScale1M1000TwoDeployments(b *testing.B) {
	cfg, err := config.Parse("bench.yaml", []byte(`
deployments:
  - {id: llama8b-h100, model: llama-3.1-8b, gpu: h100, pools: [{role: monolithic, replicas: 600}]}
  - {id: qwen14b-h100, model: qwen3-14b, gpu: h100, pools: [{role: monolithic, replicas: 400}]}
router: {routing: least-loaded}
`))
	if err != nil {
		b.Fatal(err)
	}
	models, _, err := Prepare(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchWorkload(1_000_000, 12000)
	for i := range reqs {
		reqs[i].Model = [2]string{"llama-3.1-8b", "qwen3-14b"}[i%2]
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum, err := Run(cfg, models, &chunkSource{reqs: reqs, n: 32768}, &nullSink{}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Completed != int64(len(reqs)) {
			b.Fatalf("completed %d", sum.Completed)
		}
		b.ReportMetric(float64(sum.Events), "events/op")
		b.ReportMetric(float64(sum.PeakHeld), "peak-held")
	}
}

func BenchmarkScale20k8RoundRobin(b *testing.B)    { benchScale(b, 20000, 8, "round-robin", false) }
func BenchmarkScale20k1000RoundRobin(b *testing.B) { benchScale(b, 20000, 1000, "round-robin", false) }

// BenchmarkRun100kAutoscaled is BenchmarkRun100kRoofline's workload on
// bench/autoscale.yaml: 8 replicas to start, hpa on the running batch
// between 4 and 16 (issue #14: an autoscaled 100k-request run within 1 s).
func BenchmarkRun100kAutoscaled(b *testing.B) {
	cfg, err := config.Load("../../bench/autoscale.yaml")
	if err != nil {
		b.Fatal(err)
	}
	model, _, err := Prepare(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchWorkload(100000, 96)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum, err := Run(cfg, model, &chunkSource{reqs: reqs, n: 32768}, &nullSink{}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Completed != 100000 || sum.ScaleUps+sum.ScaleDowns == 0 {
			b.Fatalf("completed %d, %d scale-ups, %d scale-downs", sum.Completed, sum.ScaleUps, sum.ScaleDowns)
		}
		b.ReportMetric(float64(sum.Events), "events/op")
	}
}
