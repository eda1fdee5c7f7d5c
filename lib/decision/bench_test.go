package decision

import (
	"io"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/trace"
)

type discard struct{}

func (discard) Write(*trace.Result) error { return nil }

// benchTrace runs 100,000 requests on 8 replicas (linear latency) with the
// recorder at a level; decision rows go through the real Arrow writer to
// io.Discard. Compare Minimal (no recorder: the engine as it was) with
// Decisions (≤ 2× is the budget) and Regret (1% of routing decisions).
func benchTrace(b *testing.B, level Level, regret float64) {
	reqs := workload(11, 100_000)
	c := testConfig(8, "least-loaded")
	c.Engine.KVBlocks = 5000
	c.Engine.MaxNumBatchedTokens = 8192
	models, _, err := engine.Prepare(&c)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		opts := engine.Options{}
		var sink engine.Sink = discard{}
		var rec *Recorder
		var dw *trace.DecisionWriter
		if level > Minimal || regret > 0 {
			s, _ := trace.Create("-", io.Discard, trace.DecisionsSchema(trace.NewMeta()))
			dw = trace.NewDecisionWriter(s, trace.DecisionsSchema(trace.NewMeta()))
			rec = New(Config{Level: level, Decisions: dw, Regret: RegretConfig{Sample: regret, Seed: 1}})
			rec.Attach(&opts)
			sink = rec.Sink(sink)
		}
		if _, err := engine.Run(c, models, engine.SliceSource(reqs), sink, opts); err != nil {
			b.Fatal(err)
		}
		if rec != nil {
			rec.Close()
			dw.Close()
		}
	}
}

func BenchmarkTrace100kMinimal(b *testing.B)   { benchTrace(b, Minimal, 0) }
func BenchmarkTrace100kDecisions(b *testing.B) { benchTrace(b, Decisions, 0) }
func BenchmarkTrace100kRegret1pct(b *testing.B) {
	benchTrace(b, Minimal, 0.01)
}
