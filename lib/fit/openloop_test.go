package fit

import (
	"math"
	"os"
	"testing"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/measure"
)

// olStage is a small two-stage inference-perf experiment (shared prefixes,
// constant load) on Llama-2-7B.
func olStages() []measure.OpenLoopStage {
	cfg := `{"api":{"streaming":true},"data":{"type":"shared_prefix","shared_prefix":{"num_groups":4,"num_prompts_per_group":5,"system_prompt_len":100,"question_len":400,"output_len":64}},` +
		`"load":{"type":"constant","stages":[{"rate":4,"duration":60},{"rate":12,"duration":60}],"num_workers":4,"worker_max_concurrency":100}}`
	var out []measure.OpenLoopStage
	for s := 0; s < 2; s++ {
		out = append(out, measure.OpenLoopStage{Experiment: "20260101-000000-llama-2-7b-tp1-test", Model: "meta-llama/Llama-2-7b-hf", GPU: "h100", TP: 1,
			MaxNumSeqs: 128, MaxNumBatchedTokens: 2048, MaxModelLen: 4096, Engine: "vllm", Config: cfg, Stage: s})
	}
	return out
}

// The α terms move away from their start: stage quantiles produced by the
// simulator with a known α0 (and the roofline warm start's step model,
// held) give that α0 back.
func TestFitAlphaFromOpenLoopStages(t *testing.T) {
	runs, err := OpenLoopRuns(olStages(), Deployment{AsyncScheduling: "on"})
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	fs, err := r.Setup.Features(PlainFeatures.Names)
	if err != nil {
		t.Fatal(err)
	}
	truth := []float64{7000, 30, 60}
	want := latency.Alpha{QueueBase: 9500}
	st, err := r.Simulate(NewFeatureModel(fs, truth, want, "truth"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Stages {
		s := &r.Stages[i]
		s.Sent, s.Completed = st[i].Sent, st[i].Completed
		s.TTFT, s.TPOT, s.E2E, s.RequestsPerSec = st[i].TTFT, st[i].TPOT, st[i].E2E, st[i].RequestsPerSec
	}
	job := &SimFitJob{Setup: r.Setup, Names: PlainFeatures.Names, Train: r.Targets(), Start: truth, MaxIn: 600, MaxOut: 64,
		Options: SimFitOptions{MaxEvals: 60, Alpha: AlphaQueueBase, HoldTerms: true, Workers: 2}}
	res, err := job.Run()
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Fit.Alpha.QueueBase; math.Abs(got/want.QueueBase-1) > 0.03 {
		t.Fatalf("α0 = %.0f µs, want %.0f ±3%% (from the default start %d)", got, want.QueueBase, latency.VLLMQueueBaseUS)
	}
	for j := range truth {
		if res.Fit.Values[j] != truth[j] {
			t.Fatalf("held coefficient %s moved: %g, want %g", PlainFeatures.Names[j], res.Fit.Values[j], truth[j])
		}
	}
}

// What the client measures: a completed request's TPOT over the lines of
// its SSE stream, numpy's interpolated percentiles, the stage's completion
// rate over its span.
func TestStageStats(t *testing.T) {
	v := []float64{4, 1, 3, 2}
	q := npQuantiles(v)
	if q.Mean != 2.5 || q.P50 != 2.5 || math.Abs(q.P90-3.7) > 1e-12 || math.Abs(q.P99-3.97) > 1e-12 {
		t.Fatalf("%+v", q)
	}
	runs, err := OpenLoopRuns(olStages(), Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.MaxInFlight != 400 {
		t.Errorf("in-flight cap %d, want 4 workers × 100", r.MaxInFlight)
	}
	st, err := r.Simulate(latency.WithAlpha(&latency.Linear{Beta0: 10000, Beta1: 1, Beta2: 0}, latency.Alpha{}))
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Sent != 240 || st[1].Sent != 720 || st[0].Failed+st[1].Failed != 0 {
		t.Fatalf("stages: %+v", st)
	}
	// A constant 10 ms step: TPOT per token is 10 ms, inference-perf's
	// (e2e − ttft)/(2n + 1) with n = 64 about 63/129 of it.
	if want := 0.010 * 63 / 129; math.Abs(st[0].TPOT.Mean/want-1) > 1e-3 {
		t.Errorf("tpot mean %.6f s, want %.6f", st[0].TPOT.Mean, want)
	}
	if math.Abs(st[0].RequestsPerSec/4-1) > 0.05 || math.Abs(st[1].RequestsPerSec/12-1) > 0.05 {
		t.Errorf("completion rates %.2f, %.2f req/s, want about 4 and 12", st[0].RequestsPerSec, st[1].RequestsPerSec)
	}
}

// The shipped stage table reads and every run in it prepares.
func TestOpenLoopTable(t *testing.T) {
	f, err := os.Open("../measure/testdata/inference_perf_h100.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := measure.ReadOpenLoopStages("inference_perf_h100.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := OpenLoopRuns(rows, Deployment{AsyncScheduling: "on"})
	if err != nil {
		t.Fatal(err)
	}
	over := 0
	for _, r := range runs {
		if r.Overloaded() {
			over++
		}
		if r.InputScale < 1.02 || r.InputScale > 1.07 {
			t.Errorf("%s: prompts scaled by %.3f: the measured prompt length is 2–7%% above the configured", r.Name, r.InputScale)
		}
	}
	if len(runs) != 16 || over != 3 {
		t.Fatalf("%d runs, %d overloaded; want 16 and 3", len(runs), over)
	}
}
