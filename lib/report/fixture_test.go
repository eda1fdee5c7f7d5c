package report

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

var update = flag.Bool("update", false, "rewrite testdata fixtures and golden files")

const (
	smallResults = "testdata/small.results.arrows"
	smallSteps   = "testdata/small.steps.arrows"
	smallRef     = "testdata/small_ref.results.arrows"
)

// res builds one result; times in µs, N for absent.
type res struct {
	id, status, kind, tenant, class, sess, step string
	deps                                        []string
	arr, enq, sched, first, fin                 int64
	inst                                        int32
	in, gen, cached, preempt, loop              int32
	tpot, delay                                 int64
	recT, recE, recI                            int64
}

const N = trace.Null

// smallRows is small enough to check by hand: docs/report.md walks through it.
func smallRows() []res {
	return []res{
		{id: "r1", status: "completed", tenant: "a", class: "interactive", arr: 0, inst: 0, enq: 100, sched: 1000, first: 51000, fin: 251000, gen: 11, tpot: 20000, in: 100, cached: 50, recT: 50000, recE: 260000, recI: 21000},
		{id: "r2", status: "completed", tenant: "b", class: "batch", arr: 100000, inst: 1, enq: 100100, sched: 101000, first: 201000, fin: 1101000, gen: 21, tpot: 45000, in: 200, preempt: 1, recT: 90000, recE: 1000000, recI: 50000},
		{id: "r3", status: "completed", tenant: "a", class: "interactive", arr: 200000, inst: 0, enq: 200100, sched: 260000, first: 330000, fin: 430000, gen: 6, tpot: 20000, in: 150, cached: 100, recT: N, recE: N, recI: N},
		{id: "r4", status: "rejected", tenant: "b", class: "batch", arr: 300000, inst: -1, enq: N, sched: N, first: N, fin: N, tpot: N, in: 80, recT: N, recE: N, recI: N},
		{id: "r5", status: "dropped", tenant: "a", class: "interactive", arr: 400000, inst: -1, enq: N, sched: N, first: N, fin: N, tpot: N, in: 90000, recT: N, recE: N, recI: N},
		{id: "r6", status: "timed_out", tenant: "b", class: "batch", arr: 500000, inst: 1, enq: 500100, sched: N, first: N, fin: N, tpot: N, in: 120, recT: N, recE: N, recI: N},
		{id: "r7", status: "unfinished", tenant: "a", class: "interactive", arr: 600000, inst: 0, enq: 600100, sched: 700000, first: 800000, fin: N, gen: 3, tpot: N, in: 60, recT: N, recE: N, recI: N},
		{id: "r8", status: "source_failed", tenant: "b", class: "batch", arr: 700000, inst: -1, enq: N, sched: N, first: N, fin: N, tpot: N, in: 0, recT: N, recE: N, recI: N},
		{id: "s1-a", status: "completed", tenant: "a", class: "interactive", sess: "s1", step: "plan", arr: 1000000, inst: 1, enq: 1000100, sched: 1001000, first: 1051000, fin: 1201000, gen: 4, tpot: 50000, in: 300, recT: N, recE: N, recI: N},
		{id: "s1-b", status: "completed", kind: "tool", tenant: "a", class: "interactive", sess: "s1", step: "tool", deps: []string{"s1-a"}, delay: 300000, arr: N, inst: -1, enq: N, sched: N, first: N, fin: 1501000, tpot: N, recT: N, recE: N, recI: N},
		{id: "s1-c", status: "completed", tenant: "a", class: "interactive", sess: "s1", step: "act", loop: 1, deps: []string{"s1-b"}, arr: N, inst: 0, enq: 1501100, sched: 1502000, first: 1602000, fin: 1702000, gen: 3, tpot: 50000, in: 400, cached: 300, recT: N, recE: N, recI: N},
		{id: "s2-a", status: "completed", tenant: "b", class: "batch", sess: "s2", step: "plan", arr: 1100000, inst: 1, enq: 1100100, sched: 1101000, first: 1141000, fin: 1241000, gen: 2, tpot: 100000, in: 50, recT: N, recE: N, recI: N},
	}
}

// readyAt is when a dependent request became ready: its dependency's finish plus delay.
func toResult(x res, ready int64) trace.Result {
	req := trace.NewRequest(x.id)
	req.ArrivalUS = x.arr
	req.DependsOn = x.deps
	req.DelayUS = x.delay
	if x.kind != "" {
		req.Kind = x.kind
	}
	req.InputTokens, req.OutputTokens = x.in, x.gen
	req.SessionID, req.TenantID, req.SLOClass, req.StepID = x.sess, x.tenant, x.class, x.step
	req.LoopIteration = x.loop
	req.RecordedTTFTUS, req.RecordedE2EUS, req.RecordedITLUS = x.recT, x.recE, x.recI
	if x.status == "source_failed" {
		req.SourceStatus = trace.SourceFailed
	}
	r := trace.NewResult(req)
	r.Status = x.status
	r.InstanceID = x.inst
	r.EnqueuedUS, r.FirstScheduledUS, r.FirstTokenUS, r.FinishedUS = x.enq, x.sched, x.first, x.fin
	if x.enq != N {
		r.AdmittedUS, r.RoutedUS = x.enq-100, x.enq-100
	}
	start := x.arr
	if start == N {
		start = ready
	}
	if x.first != N {
		r.TTFTUS = x.first - start
	}
	if x.fin != N && x.status == "completed" {
		r.E2EUS = x.fin - start
	}
	r.TPOTUS = x.tpot
	r.Preemptions, r.CachedTokens, r.GeneratedTokens = x.preempt, x.cached, x.gen
	if x.status == "dropped" {
		r.DropReason = "exceeds_kv_capacity"
	}
	return r
}

func writeResults(t testing.TB, path string, rows []res) {
	t.Helper()
	writeResultsMeta(t, path, rows, trace.NewMeta())
}

// simMeta is the metadata blis-sim writes: the fixture's runs say what
// produced them (the report's config tables). The reference run used a
// fitted coefficients file.
func simMeta(latency string) trace.Meta {
	seed := uint64(42)
	md := trace.NewMeta().With(trace.Stage{Tool: "blis-synth", Version: trace.Version}).
		With(trace.Stage{Tool: "blis-sim", Version: trace.Version, Args: []string{"--replicas", "2"}, Seed: &seed})
	md.SetSimDeployments([]trace.SimDeployment{{ID: "qwen3-32b", Model: "qwen3-32b", GPU: "h100", TP: 2, Replicas: 2, Latency: latency, KVBlocks: 1000}})
	md.Set(trace.MetaSimRouter, "least-loaded")
	return md
}

func writeResultsMeta(t testing.TB, path string, rows []res, md trace.Meta) {
	t.Helper()
	sink, err := trace.Create(path, nil, trace.ResultsSchema(md))
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewResultWriter(sink, trace.ResultsSchema(md))
	fin := map[string]int64{}
	for _, x := range rows {
		ready := int64(N)
		for _, d := range x.deps {
			ready = max(ready, fin[d])
		}
		if x.kind != "tool" && ready != N {
			ready += x.delay // think time; a tool call's delay is its own duration
		}
		r := toResult(x, ready)
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
		fin[x.id] = x.fin
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeSteps(t testing.TB, path string, steps []trace.Step) {
	t.Helper()
	sink, err := trace.Create(path, nil, trace.StepsSchema(trace.NewMeta()))
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewStepWriter(sink, trace.StepsSchema(trace.NewMeta()))
	for i := range steps {
		if err := w.Write(&steps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func smallStepRows() []trace.Step {
	var out []trace.Step
	for i := int64(0); i < 17; i++ {
		out = append(out, trace.Step{InstanceID: 0, StepIndex: i, StartUS: i * 100000, DurationUS: 50000, BatchSize: 2,
			PrefillTokens: 64, DecodeTokens: 1, KVBlocksUsed: int32(10 + i), KVBlocksTotal: 100, Waiting: int32(i % 3), Running: 2})
		out = append(out, trace.Step{InstanceID: 1, StepIndex: i, StartUS: i*100000 + 20000, DurationUS: 80000, BatchSize: 1,
			DecodeTokens: 1, KVBlocksUsed: 30, KVBlocksTotal: 100, Waiting: 1, Running: 1})
	}
	return out
}

// refRows is a second run of the same requests with other latencies, for --compare.
func refRows() []res {
	rows := smallRows()
	for i := range rows {
		if rows[i].fin != N && rows[i].kind != "tool" {
			rows[i].fin += 20000
		}
	}
	return rows
}

func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		tb := &testing.T{}
		_ = tb
	}
	os.Exit(m.Run())
}

func TestFixtures(t *testing.T) {
	if !*update {
		for _, p := range []string{smallResults, smallSteps, smallRef} {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("%s missing: run go test ./lib/report -run TestFixtures -update", p)
			}
		}
		return
	}
	os.MkdirAll(filepath.Dir(smallResults), 0o755)
	writeResultsMeta(t, smallResults, smallRows(), simMeta("roofline:qwen3-32b/h100/tp2"))
	writeResultsMeta(t, smallRef, refRows(), simMeta("fitted:coefficients/qwen3-32b/h100-tp2-vllm-0.12.0.yaml"))
	writeSteps(t, smallSteps, smallStepRows())
}
