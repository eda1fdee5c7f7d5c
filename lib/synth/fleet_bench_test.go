package synth

import (
	"os"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/trace"
)

// Issue 28's day of a fleet in process: bench/fleet-day.yaml (10 M
// requests over 24 hours with a diurnal rate) on 1,000 Llama-3.1-8B H100
// replicas, least-loaded, generated while it is simulated, as `blis-synth
// bench/fleet-day.yaml | blis-sim --replicas 1000 --router least-loaded`
// runs it (DAY=1 bench/fleet.sh) without the Arrow encoding between them.
// BenchmarkFleetDay2h is its first two hours with the peak moved to the
// first hour (1.41 M requests): the same per-request work in a minute.
func BenchmarkFleetDay(b *testing.B) { benchDay(b) }

func BenchmarkFleetDay2h(b *testing.B) {
	benchDay(b, "horizon: 86400s", "horizon: 7200s", "peak_at: 50400s", "peak_at: 3600s")
}

// benchDay runs bench/fleet-day.yaml with each of edits' old lines
// replaced by the new one after it.
func benchDay(b *testing.B, edits ...string) {
	src, err := os.ReadFile("../../bench/fleet-day.yaml")
	if err != nil {
		b.Fatal(err)
	}
	text := string(src)
	for i := 0; i+1 < len(edits); i += 2 {
		if strings.Count(text, edits[i]) != 1 {
			b.Fatalf("bench/fleet-day.yaml no longer has one %q for the 2-hour cut to edit", edits[i])
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	s, err := Parse([]byte(text), "fleet-day.yaml", "../../bench")
	if err != nil {
		b.Fatal(err)
	}
	cfg := config.Default()
	cfg.Replicas = 1000
	cfg.Router.Routing = "least-loaded"
	models, _, err := engine.Prepare(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		gen := NewStream(s)
		var sink countSink
		sum, err := engine.Run(cfg, models, gen, &sink, engine.Options{PrefixBlockSize: s.PrefixBlockSize, PrefixUnique: s.PrefixUnique()})
		gen.Close()
		if err != nil {
			b.Fatal(err)
		}
		if sum.Completed != sum.Injected || sink.n != sum.Injected {
			b.Fatalf("%d requests injected, %d completed, %d results", sum.Injected, sum.Completed, sink.n)
		}
		b.ReportMetric(float64(sum.Injected), "requests/op")
		b.ReportMetric(float64(sum.Events), "events/op")
		b.ReportMetric(float64(sum.Steps), "steps/op")
	}
}

type countSink struct{ n int64 }

func (s *countSink) Write(*trace.Result) error { s.n++; return nil }
