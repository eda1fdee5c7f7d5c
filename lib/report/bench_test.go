package report

import (
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// writeSynthetic writes n plausible results rows (seeded, so the file is the
// same every time) for the 10M-row benchmark in bench/report.sh.
func writeSynthetic(tb testing.TB, path string, n int) {
	sink, err := trace.Create(path, nil, trace.ResultsSchema(trace.NewMeta()))
	if err != nil {
		tb.Fatal(err)
	}
	w := trace.NewResultWriter(sink, trace.ResultsSchema(trace.NewMeta()))
	rng := rand.New(rand.NewPCG(42, 7))
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	classes := []string{"interactive", "batch"}
	t := int64(0)
	for i := 0; i < n; i++ {
		t += int64(rng.ExpFloat64() * 1000) // ~1000 req/s
		req := trace.NewRequest("req-" + strconv.Itoa(i))
		req.ArrivalUS = t
		req.InputTokens = int32(64 + rng.IntN(4000))
		req.OutputTokens = int32(1 + rng.IntN(500))
		req.TenantID = tenants[rng.IntN(len(tenants))]
		req.SLOClass = classes[rng.IntN(len(classes))]
		r := trace.NewResult(req)
		r.Status = trace.StatusCompleted
		if u := rng.Float64(); u < 0.01 {
			r.Status = trace.StatusRejected
		} else if u < 0.015 {
			r.Status = trace.StatusTimedOut
		}
		if r.Status == trace.StatusCompleted {
			r.InstanceID = int32(rng.IntN(16))
			r.AdmittedUS, r.RoutedUS, r.EnqueuedUS = t+50, t+60, t+200
			r.FirstScheduledUS = r.EnqueuedUS + int64(math.Exp(rng.NormFloat64()+7))
			r.TTFTUS = r.FirstScheduledUS - t + int64(req.InputTokens)*20
			r.FirstTokenUS = t + r.TTFTUS
			r.TPOTUS = 8000 + rng.Int64N(30000)
			r.FinishedUS = r.FirstTokenUS + r.TPOTUS*int64(req.OutputTokens-1)
			r.E2EUS = r.FinishedUS - t
			r.GeneratedTokens = req.OutputTokens
			r.CachedTokens = int32(rng.IntN(int(req.InputTokens)))
			r.Preemptions = int32(rng.IntN(100) / 98)
			r.RecordedTTFTUS = r.TTFTUS + rng.Int64N(20000) - 10000
			r.RecordedE2EUS = r.E2EUS + rng.Int64N(200000) - 100000
			r.RecordedITLUS = r.TPOTUS + rng.Int64N(2000) - 1000
			r.RecordedTTFTUS, r.RecordedE2EUS, r.RecordedITLUS = max(r.RecordedTTFTUS, 0), max(r.RecordedE2EUS, 0), max(r.RecordedITLUS, 0)
		}
		if err := w.Write(&r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// TestGenerateBig writes the benchmark input when BLIS_REPORT_BIG names a path.
func TestGenerateBig(t *testing.T) {
	path := os.Getenv("BLIS_REPORT_BIG")
	if path == "" {
		t.Skip("set BLIS_REPORT_BIG=path (and BLIS_REPORT_ROWS, default 10000000) to write the benchmark input")
	}
	n := 10_000_000
	if s := os.Getenv("BLIS_REPORT_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	writeSynthetic(t, path, n)
}

// BenchmarkReport times Build + every text format on 200k synthetic rows
// (the 10M-row figure comes from bench/report.sh).
func BenchmarkReport(b *testing.B) {
	path := b.TempDir() + "/bench.arrows"
	writeSynthetic(b, path, 200_000)
	slos, _ := slo.Parse([]string{"ttft=500ms,tpot=30ms"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := Build([]string{path}, Options{SLOs: slos, By: "tenant"})
		if err != nil {
			b.Fatal(err)
		}
		if err := rep.Write(io.Discard, FormatTable); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/200_000, "ns/row")
}

// BenchmarkBigFile reads the file named by BLIS_REPORT_BIG (see bench/report.sh).
func BenchmarkBigFile(b *testing.B) {
	path := os.Getenv("BLIS_REPORT_BIG")
	if path == "" {
		b.Skip("set BLIS_REPORT_BIG to a results file")
	}
	for i := 0; i < b.N; i++ {
		rep, err := Build([]string{path}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := rep.Write(io.Discard, FormatTable); err != nil {
			b.Fatal(err)
		}
	}
}
