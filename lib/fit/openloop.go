package fit

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/synth/infperf"
	"github.com/blis-sim/blis/lib/trace"
)

// OpenLoopRun is one open-loop benchmark run (an inference-perf
// experiment) ready to simulate: the deployment it ran on, the requests
// its load generator sent (regenerated from its config, stage by stage)
// and what the client measured per stage.
type OpenLoopRun struct {
	Name        string
	Setup       *Setup
	Reqs        []trace.Request
	MaxInFlight int
	Stages      []measure.OpenLoopStage // by stage number
	InputScale  float64                 // measured / configured prompt length
	Notes       []string
}

// OpenLoopRuns groups stage rows by experiment and prepares each run.
// dep gives what the rows do not say (GPU memory utilisation, KV blocks,
// async scheduling; zero values take Deployment's defaults); the rows give
// model, GPU, TP, engine limits and version.
func OpenLoopRuns(rows []measure.OpenLoopStage, dep Deployment) ([]*OpenLoopRun, error) {
	var order []string
	by := map[string][]measure.OpenLoopStage{}
	for _, r := range rows {
		if _, ok := by[r.Experiment]; !ok {
			order = append(order, r.Experiment)
		}
		by[r.Experiment] = append(by[r.Experiment], r)
	}
	var out []*OpenLoopRun
	for _, name := range order {
		r, err := NewOpenLoopRun(by[name], dep)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// NewOpenLoopRun prepares one experiment from its stage rows. The prompts
// are scaled to the measured mean prompt length (older inference-perf
// versions re-tokenised their random prompts a few percent longer than
// configured; the server saw what the client counted).
func NewOpenLoopRun(stages []measure.OpenLoopStage, dep Deployment) (*OpenLoopRun, error) {
	sort.Slice(stages, func(i, j int) bool { return stages[i].Stage < stages[j].Stage })
	s0 := stages[0]
	for i, s := range stages {
		if s.Stage != i {
			return nil, fmt.Errorf("stages %v: expected 0..%d", stageNums(stages), len(stages)-1)
		}
		if s.Config != s0.Config || s.Model != s0.Model || s.TP != s0.TP || s.MaxNumSeqs != s0.MaxNumSeqs || s.MaxNumBatchedTokens != s0.MaxNumBatchedTokens {
			return nil, fmt.Errorf("stage %d: its deployment or config differs from stage 0's", s.Stage)
		}
	}
	cfg, err := infperf.Parse([]byte(s0.Config), s0.Experiment+" config")
	if err != nil {
		return nil, err
	}
	t, err := cfg.Generate(infperf.Options{})
	if err != nil {
		return nil, err
	}
	if len(t.Stages) != len(stages) {
		return nil, fmt.Errorf("the config has %d stages, the measurements %d", len(t.Stages), len(stages))
	}
	scale := 1.0
	if s0.PromptLenMean > 0 {
		sum := 0.0
		for i := range t.Requests {
			sum += float64(t.Requests[i].InputTokens)
		}
		scale = s0.PromptLenMean / (sum / float64(len(t.Requests)))
		if t, err = cfg.Generate(infperf.Options{InputScale: scale}); err != nil {
			return nil, err
		}
	}
	dep.Model, dep.GPU, dep.TP = s0.Model, s0.GPU, s0.TP
	dep.MaxNumSeqs, dep.MaxNumBatchedTokens = s0.MaxNumSeqs, s0.MaxNumBatchedTokens
	dep.Engine, dep.Version = firstNonEmpty(s0.Engine, "vllm"), s0.Version
	dep.PrefixCaching = true // vLLM V1's default
	setup, err := NewSetup(dep)
	if err != nil {
		return nil, err
	}
	return &OpenLoopRun{Name: s0.Experiment, Setup: setup, Reqs: t.Requests, MaxInFlight: t.MaxInFlight,
		Stages: stages, InputScale: scale, Notes: t.Notes}, nil
}

func stageNums(st []measure.OpenLoopStage) []int {
	var n []int
	for _, s := range st {
		n = append(n, s.Stage)
	}
	return n
}

// Overloaded reports whether the run failed more than a tenth of its
// requests (the client's timeouts): the server could not keep up.
func (r *OpenLoopRun) Overloaded() bool {
	sent, failed := 0, 0
	for _, s := range r.Stages {
		sent += s.Sent
		failed += s.Failed
	}
	return failed*10 > sent
}

// StageStats are one stage's statistics as inference-perf computes them,
// simulated or measured (measure.LifecycleStats). Times s.
type StageStats struct {
	Sent, Completed, Failed int
	TTFT, TPOT, E2E         measure.Quantiles
	RequestsPerSec          float64
}

// Measured returns a measured stage in StageStats form.
func Measured(s measure.OpenLoopStage) StageStats {
	return StageStats{Sent: s.Sent, Completed: s.Completed, Failed: s.Failed, TTFT: s.TTFT, TPOT: s.TPOT, E2E: s.E2E, RequestsPerSec: s.RequestsPerSec}
}

// Simulate runs the experiment with model and returns each stage's
// statistics as the benchmark client reports them.
func (r *OpenLoopRun) Simulate(m latency.Model) ([]StageStats, error) {
	cfg := r.Setup.Engine
	cfg.Replicas = 1
	sink := &stageSink{stage: map[string]int{}}
	for i := range r.Stages {
		sink.stage[fmt.Sprint(r.Stages[i].Stage)] = i
	}
	sink.acc = make([]stageAcc, len(r.Stages))
	in := append([]trace.Request(nil), r.Reqs...)
	opts := engine.Options{Path: r.Name, PrefixBlockSize: infperf.BlockSize, MaxInFlight: r.MaxInFlight}
	if _, err := engine.Run(cfg, []latency.Model{m}, engine.SliceSource(in), sink, opts); err != nil {
		return nil, err
	}
	if sink.err != nil {
		return nil, sink.err
	}
	out := make([]StageStats, len(sink.acc))
	for i := range sink.acc {
		out[i] = sink.acc[i].stats()
	}
	return out, nil
}

// stageSink folds results into per-stage accumulators.
type stageSink struct {
	stage map[string]int
	acc   []stageAcc
	err   error
}

type stageAcc struct {
	ttft, tpot, e2e []float64
	failed          int
	first, last     float64 // earliest send, latest end, s
	init            bool
}

func (s *stageSink) Write(r *trace.Result) error {
	i, ok := s.stage[r.Stage]
	if !ok {
		s.err = fmt.Errorf("result %s: stage %q not in the run", r.ID, r.Stage)
		return s.err
	}
	a := &s.acc[i]
	send := float64(r.ArrivalUS) / 1e6
	end := float64(r.FinishedUS) / 1e6
	if !a.init || send < a.first {
		a.first = send
	}
	if !a.init || end > a.last {
		a.last = end
	}
	a.init = true
	if r.Status != trace.StatusCompleted {
		a.failed++
		return nil
	}
	a.ttft = append(a.ttft, float64(r.TTFTUS)/1e6)
	a.e2e = append(a.e2e, float64(r.E2EUS)/1e6)
	// inference-perf times every line of the SSE stream: a data line and an
	// empty line per streamed event (one per token), then [DONE] and its
	// empty line; TPOT is (last line − first line) / (lines − 1).
	a.tpot = append(a.tpot, float64(r.E2EUS-r.TTFTUS)/1e6/float64(2*r.GeneratedTokens+1))
	return nil
}

func (a *stageAcc) stats() StageStats {
	s := StageStats{Completed: len(a.ttft), Failed: a.failed}
	s.Sent = s.Completed + s.Failed
	s.TTFT, s.TPOT, s.E2E = npQuantiles(a.ttft), npQuantiles(a.tpot), npQuantiles(a.e2e)
	if span := a.last - a.first; span > 0 {
		s.RequestsPerSec = float64(s.Completed) / span
	}
	return s
}

// npQuantiles are mean and numpy's default (linearly interpolated)
// percentiles, as inference-perf computes them.
func npQuantiles(v []float64) measure.Quantiles {
	if len(v) == 0 {
		return measure.Quantiles{Mean: math.NaN(), P50: math.NaN(), P90: math.NaN(), P99: math.NaN()}
	}
	sort.Float64s(v)
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	p := func(q float64) float64 {
		h := q * float64(len(v)-1)
		lo := math.Floor(h)
		if int(lo)+1 >= len(v) {
			return v[len(v)-1]
		}
		return v[int(lo)] + (h-lo)*(v[int(lo)+1]-v[int(lo)])
	}
	return measure.Quantiles{Mean: sum / float64(len(v)), P50: p(0.5), P90: p(0.9), P99: p(0.99)}
}

// OpenLoopStatNames are the statistics an open-loop stage is judged and
// fitted on, in StageValues order.
var OpenLoopStatNames = []string{"ttft_p50", "ttft_p90", "tpot_mean", "e2e_p50", "e2e_p90", "requests_per_s"}

// StageValues returns s's statistics in OpenLoopStatNames order: times in
// µs (as the other fitting targets), the completion rate in req/s.
func StageValues(s StageStats) []float64 {
	return []float64{s.TTFT.P50 * 1e6, s.TTFT.P90 * 1e6, s.TPOT.Mean * 1e6, s.E2E.P50 * 1e6, s.E2E.P90 * 1e6, s.RequestsPerSec}
}

// openLoopTarget is one stage of a run (Target): its p50 and p90 TTFT,
// mean TPOT, p50 and p90 E2E and completion rate, as inference-perf
// reports them. Predict simulates the whole run (the stage's load follows
// the earlier stages').
type openLoopTarget struct {
	r     *OpenLoopRun
	stage int // index in r.Stages
}

// Targets returns one fitting target per stage.
func (r *OpenLoopRun) Targets() []Target {
	out := make([]Target, len(r.Stages))
	for i := range r.Stages {
		out[i] = &openLoopTarget{r: r, stage: i}
	}
	return out
}

func (t *openLoopTarget) Label() string {
	return fmt.Sprintf("%s stage %d", ShortName(t.r.Name), t.r.Stages[t.stage].Stage)
}
func (t *openLoopTarget) Names() []string { return OpenLoopStatNames }
func (t *openLoopTarget) Measured() []float64 {
	return StageValues(Measured(t.r.Stages[t.stage]))
}

func (t *openLoopTarget) Predict(m latency.Model) ([]float64, error) {
	st, err := t.r.Simulate(m)
	if err != nil {
		return nil, err
	}
	return StageValues(st[t.stage]), nil
}

// ShortName is a run's model and profile ("llama-2-7b-tp1-general").
func ShortName(experiment string) string {
	// inference-sim/training names runs <date>-<time>-<model>-tp<N>-<profile>.
	parts := strings.SplitN(experiment, "-", 3)
	if len(parts) == 3 && len(parts[0]) == 8 {
		return parts[2]
	}
	return experiment
}
