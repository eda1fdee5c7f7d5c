package sweep

import (
	"os"
	"testing"

	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/trace"
)

// The sweep's overhead per run is BenchmarkSweepRun − BenchmarkBareRun: the
// same 1,000-request simulation, bare (the engine writing results nowhere)
// and as one run of a sweep (results encoded as Arrow, summarised by
// lib/report, the record written to disk). bench/sweep.sh runs both and a
// 1,000-run sweep through the binary.

const benchSpec = "workload: {trace: ../../../testdata/azure2023_code.csv, limit: 1000}\n" +
	"axes:\n  replicas: [4]\n  seed: {replications: 1000}\n"

func benchPlan(b *testing.B) *Plan {
	s, err := Parse([]byte(benchSpec), "bench.yaml", "testdata")
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewPlan(s)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

type discard struct{}

func (discard) Write(*trace.Result) error { return nil }

func BenchmarkBareRun(b *testing.B) {
	p := benchPlan(b)
	r := p.Runs[0]
	reqs, release, err := newTraceCache(1<<20).get(r.wkey, r.workload.trace)
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run := &sim.Run{Source: sliceSource(reqs.rows, reqs.sorted), PrefixBlockSize: reqs.prefixBlock,
			MaxInFlight: reqs.maxInFlight, PrefixUnique: reqs.prefixUnique, Results: sim.Output{Sink: discard{}}}
		if _, err := r.cluster.simulate(run); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSweepRun(b *testing.B) {
	p := benchPlan(b)
	x, err := newRunner(p.Spec, "")
	if err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	if _, err := x.run(p.Runs[0]); err != nil { // load the trace once, as a sweep does
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := p.Runs[i%len(p.Runs)]
		rec, err := x.run(r)
		if err != nil {
			b.Fatal(err)
		}
		if err := writeRecord(out, rec); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	os.RemoveAll(out)
}

// BenchmarkPlan is the planning cost per run (resolving and hashing).
func BenchmarkPlan(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		benchPlan(b)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000/1e6, "ms/run")
}
