package engine

import (
	"flag"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
)

// Issue 28's fleet benchmarks: 100k requests (512 ± 256 tokens in and
// out) on 8, 1,000 and 10,000 Llama-3.1-8B H100 replicas at 96 req/s (an
// over-provisioned fleet: one decode per step, the case leaping is for)
// and at 12,000 req/s (12 per replica), for each router family. With
// -no-leap (Options.NoLeap) every step is an event, as before leaping.
// steps/op against events/op is what leaping saves.
var noLeapBench = flag.Bool("no-leap", false, "benchmarks take every step as an event (Options.NoLeap)")

func benchFleet(b *testing.B, n, replicas int, rate float64, routing string) {
	cfg := config.Default()
	cfg.Replicas = replicas
	cfg.Router.Routing = routing
	models, _, err := Prepare(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	reqs := benchWorkload(n, rate)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum, err := Run(cfg, models, &chunkSource{reqs: reqs, n: 32768}, &nullSink{}, Options{NoLeap: *noLeapBench})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Completed != int64(n) {
			b.Fatalf("completed %d of %d", sum.Completed, n)
		}
		b.ReportMetric(float64(sum.Events), "events/op")
		b.ReportMetric(float64(sum.Steps), "steps/op")
		b.ReportMetric(float64(sum.Spans), "spans/op")
	}
}

func BenchmarkFleet100k8At96LeastLoaded(b *testing.B) { benchFleet(b, 100000, 8, 96, "least-loaded") }
func BenchmarkFleet100k1000At96LeastLoaded(b *testing.B) {
	benchFleet(b, 100000, 1000, 96, "least-loaded")
}
func BenchmarkFleet100k1000At96PrefixAffinity(b *testing.B) {
	benchFleet(b, 100000, 1000, 96, "prefix-affinity")
}
func BenchmarkFleet100k1000At96Weighted(b *testing.B) { benchFleet(b, 100000, 1000, 96, "weighted") }
func BenchmarkFleet100k8At12kLeastLoaded(b *testing.B) {
	benchFleet(b, 100000, 8, 12000, "least-loaded")
}
func BenchmarkFleet100k1000At12kLeastLoaded(b *testing.B) {
	benchFleet(b, 100000, 1000, 12000, "least-loaded")
}
func BenchmarkFleet100k1000At12kPrefixAffinity(b *testing.B) {
	benchFleet(b, 100000, 1000, 12000, "prefix-affinity")
}
func BenchmarkFleet100k1000At12kWeighted(b *testing.B) {
	benchFleet(b, 100000, 1000, 12000, "weighted")
}

// 10,000 replicas at 120,000 req/s (12 per replica, 100k requests): the
// replicas' hot state and the router's boards at fleet size.
func BenchmarkFleet100k10000At120kLeastLoaded(b *testing.B) {
	benchFleet(b, 100000, 10000, 120000, "least-loaded")
}
