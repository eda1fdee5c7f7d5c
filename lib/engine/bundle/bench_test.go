package bundle_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/rng"
)

// benchWorkload is lib/engine's: Poisson at rate req/s, input and output
// normal(512, 256) clamped to [2, 7000].
func benchWorkload(n int, rate float64) []row.Request {
	arr, lens := rng.New(1, "arrivals"), rng.New(1, "lengths")
	clamp := func(x float64) int32 { return int32(min(max(math.Round(x), 2), 7000)) }
	reqs := make([]row.Request, n)
	t := 0.0
	for i := range reqs {
		t += arr.ExpFloat64() / rate
		r := row.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(t*1e6), clamp(512+256*lens.NormFloat64()), clamp(512+256*lens.NormFloat64())
		reqs[i] = r
	}
	return reqs
}

type countSink struct{ n int }

func (s *countSink) Write(*row.Result) error { s.n++; return nil }

// BenchmarkRun100k is lib/engine's BenchmarkRun100kRoofline (8 replicas,
// 96 req/s) with least-loaded routing and a queue limit: built in, as
// Starlark (routing + admission), as decision trees and as templates.
func BenchmarkRun100k(b *testing.B) {
	reqs := benchWorkload(100000, 96)
	for _, bc := range []struct{ name, bundle string }{
		{"builtin", ""},
		{"starlark", "bench.yaml"},
		{"tree", "bench-tree.yaml"},
		{"template", "least-loaded-template"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := config.Default()
			cfg.Replicas = 8
			cfg.Router.Routing = "least-loaded"
			cfg.Router.Admission, cfg.Router.QueueLimit = "queue-limit", 5001
			models, _, err := engine.Prepare(&cfg)
			if err != nil {
				b.Fatal(err)
			}
			var bd *bundle.Bundle
			switch bc.bundle {
			case "":
			case "least-loaded-template":
				bd, err = bundle.Parse("mem.yaml", []byte("routing: {kind: parameterized, template: least-loaded}\nadmission: {kind: parameterized, template: queue-limit, params: {limit: 5001}}\n"), bundle.Env{})
			default:
				bd, err = bundle.Load(filepath.Join(examples, bc.bundle), bundle.Env{})
			}
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := cfg
				opts := engine.Options{}
				var sink engine.Sink = &countSink{}
				if bd != nil {
					rt, err := bd.Instantiate(&c)
					if err != nil {
						b.Fatal(err)
					}
					opts.Policies = rt.Policies()
				}
				sum, err := engine.Run(c, models, engine.SliceSource(reqs), sink, opts)
				if err != nil {
					b.Fatal(err)
				}
				if sum.Completed != int64(len(reqs)) {
					b.Fatalf("completed %d", sum.Completed)
				}
			}
		})
	}
}
