// Package eval is the evaluator a policy search calls (blis-eval): it runs
// a candidate — a cluster config and a policy bundle (issue 12's: built-in
// templates, decision trees, sandboxed Starlark) — through the simulator in-process, with decision traces
// and anomalies on, scores it with a fitness spec and writes one JSON
// object: validity, fitness, the primary scalar, metrics (mean and 95%
// confidence interval over seeded replications), the reflective summary
// and the paths of its artifacts. An invalid candidate is an answer
// (valid: false, with the error), not a failure of the evaluator.
package eval

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blis-sim/blis/lib/cleanup"
	"github.com/blis-sim/blis/lib/decision"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/fitness"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/summary"
	"github.com/blis-sim/blis/lib/synth"
	"github.com/blis-sim/blis/lib/trace"
)

// Options describe one evaluation.
type Options struct {
	Cluster  string // cluster YAML of the candidate (required)
	Policy   string // policy bundle of the candidate (LoadPolicy)
	Fitness  *fitness.Spec
	Requests string // requests table, or
	Workload string // a blis-synth workload spec, regenerated per seed
	Seeds    int    // replications (>= 1)
	// Artifacts is the directory kept for the tables and the summary
	// (created); "" writes them to a temporary directory removed before
	// Run returns (a search loop calls blis-eval thousands of times), and
	// Output.Artifacts is then empty.
	Artifacts string
	// RegretSample is the fraction of routing decisions replayed.
	RegretSample float64
	Strategy     string // summary strategy
	Args         []string
	// Timeout bounds the whole evaluation's wall-clock time (0: none): past
	// it the run in progress stops at once and the candidate is invalid.
	Timeout time.Duration
	// MaxRunSteps caps the Starlark steps of each replication's run, all
	// stages together (0: the bundle's sandbox.max_run_steps, if any).
	MaxRunSteps uint64
}

// Output is blis-eval's JSON object.
type Output struct {
	Valid   bool                        `json:"valid"`
	Error   string                      `json:"error,omitempty"`
	Fitness *fitness.Result             `json:"fitness,omitempty"`
	Primary fitness.Float               `json:"primary"`
	Metrics map[string]fitness.Float    `json:"metrics"`
	CI95    map[string][2]fitness.Float `json:"ci95,omitempty"`
	Seeds   []uint64                    `json:"seeds"`
	// Notes are warnings about how to read the numbers (replications that
	// could not vary, …).
	Notes     []string          `json:"notes,omitempty"`
	Summary   string            `json:"summary"`
	Artifacts map[string]string `json:"artifacts"`
}

// LoadPolicy loads the candidate's policy bundle: the file given
// (--policy), else the one the cluster file names (its policy: key), else
// none (nil).
func LoadPolicy(path string, cfg *config.Cluster) (*bundle.Bundle, error) {
	if path != "" {
		return bundle.Load(path, bundle.Env{})
	}
	return bundle.FromConfig(cfg, bundle.Env{})
}

// invalid is a candidate's own failure: reported as valid: false.
type invalid struct{ err error }

func (e invalid) Error() string { return e.err.Error() }

// Run evaluates one candidate. The error is the evaluator's own (bad usage
// or input of the harness: exit 2); a candidate's failure is in Output.
func Run(o Options) (*Output, error) {
	if o.Artifacts != "" {
		return run(o)
	}
	dir, err := os.MkdirTemp("", "blis-eval-")
	if err != nil {
		return nil, err
	}
	forget := cleanup.Add(dir) // removed on SIGINT/SIGTERM too
	defer func() {
		os.RemoveAll(dir)
		forget()
	}()
	o.Artifacts = dir
	out, err := run(o)
	if out != nil {
		out.Artifacts = map[string]string{} // none kept
	}
	return out, err
}

func run(o Options) (*Output, error) {
	if o.Seeds < 1 {
		return nil, fmt.Errorf("--seeds: expected >= 1, found %d", o.Seeds)
	}
	if o.Fitness == nil {
		return nil, errors.New("--fitness is required")
	}
	if (o.Requests == "") == (o.Workload == "") {
		return nil, errors.New("expected one requests table, or --workload SPEC")
	}
	if err := os.MkdirAll(o.Artifacts, 0o755); err != nil {
		return nil, err
	}
	out := &Output{Metrics: map[string]fitness.Float{}, Artifacts: map[string]string{}}
	var reqs []trace.Request
	var prefixBlock int
	var reqMeta trace.Meta
	var spec *synth.Spec
	if o.Requests != "" {
		var err error
		if reqs, reqMeta, prefixBlock, err = LoadRequests(o.Requests); err != nil {
			return nil, err
		}
	} else {
		var err error
		if spec, err = synth.Load(o.Workload); err != nil {
			return nil, err
		}
	}
	// The wall-clock budget runs from here: everything the candidate
	// costs (loading its files, simulating, scoring).
	var stop interrupter
	if o.Timeout > 0 {
		t := time.AfterFunc(o.Timeout, func() {
			stop.stop(fmt.Errorf("timeout: the evaluation ran past --timeout %s (wall clock); the run was stopped", o.Timeout))
		})
		defer t.Stop()
	}
	cfg, err := config.Load(o.Cluster)
	if err != nil {
		return out.fail(err), nil
	}
	pol, err := LoadPolicy(o.Policy, &cfg)
	if err != nil {
		return out.fail(err), nil // the candidate's bundle does not load
	}
	var perSeed []map[string]float64
	for i := 0; i < o.Seeds; i++ {
		if err := stop.err(); err != nil {
			return out.fail(err), nil
		}
		seed := cfg.Seed + uint64(i)
		c := cfg
		c.Seed = seed
		rs, meta, pb := reqs, reqMeta, prefixBlock
		if spec != nil {
			s := *spec
			s.Seed = spec.Seed + uint64(i)
			rs = rs[:0:0]
			if _, err := synth.Generate(&s, func(r *trace.Request) error { rs = append(rs, cloneReq(r)); return nil }); err != nil {
				return nil, fmt.Errorf("%s: %w", o.Workload, err)
			}
			meta, pb = trace.NewMeta(), s.PrefixBlockSize
			if s.MaxInFlight > 0 {
				meta.Set(trace.MetaMaxInFlight, strconv.Itoa(s.MaxInFlight))
			}
		}
		m, paths, err := runSeed(&o, c, pol, rs, meta, pb, i, &stop)
		if err != nil {
			if e := stop.err(); e != nil {
				return out.fail(e), nil // whatever the run said when it was stopped
			}
			var inv invalid
			if errors.As(err, &inv) {
				return out.fail(inv.err), nil
			}
			return nil, err
		}
		out.Seeds = append(out.Seeds, seed)
		perSeed = append(perSeed, m)
		for k, p := range paths {
			out.Artifacts[k] = p
		}
	}
	out.aggregate(perSeed)
	if len(perSeed) > 1 && identical(perSeed) {
		why := "the workload (--workload SPEC) was regenerated per replication, yet nothing in it or the cluster changed a metric"
		if spec == nil {
			why = "the requests table is fixed and nothing in the cluster or the policy draws from the seed (no random or power-of-two router, no Starlark random: true, no noisy predictor, no random provisioning delay)"
		}
		out.Notes = append(out.Notes, fmt.Sprintf("the %d replications gave identical metrics, so every ci95 has zero width and says nothing about uncertainty: %s; give --workload SPEC to draw a new workload per replication", len(perSeed), why))
	}
	// The fitness of the means.
	ms := fitness.Metrics{}
	for k, v := range out.Metrics {
		ms[k] = float64(v)
	}
	fr := o.Fitness.Score(ms)
	fr.Run = o.Cluster
	one := []fitness.Result{fr}
	fitness.Rank(one) // alone: rank 1 and the front when feasible
	fr = one[0]
	out.Fitness, out.Primary = &fr, fr.Primary
	out.Valid = fr.Feasible
	if !fr.Feasible {
		out.Error = "infeasible: " + strings.Join(fr.Violations, "; ")
	}
	// The summary of the first replication.
	var sb strings.Builder
	if err := summary.Write(&sb, summary.Options{Results: out.Artifacts["results"], Decisions: out.Artifacts["decisions"],
		Anomalies: out.Artifacts["anomalies"], ScaleEvents: out.Artifacts["scale_events"], Fitness: o.Fitness, Strategy: o.Strategy}); err != nil {
		return nil, err
	}
	out.Summary = sb.String()
	p := filepath.Join(o.Artifacts, "summary.md")
	if err := os.WriteFile(p, []byte(out.Summary), 0o644); err != nil {
		return nil, err
	}
	out.Artifacts["summary"] = p
	return out, nil
}

func (o *Output) fail(err error) *Output {
	o.Valid, o.Error = false, err.Error()
	o.Primary = fitness.Float(math.NaN())
	return o
}

func cloneReq(r *trace.Request) trace.Request {
	c := *r
	c.DependsOn = append([]string(nil), r.DependsOn...)
	c.PrefixHashes = append([]uint64(nil), r.PrefixHashes...)
	return c
}

// LoadRequests reads a requests table into memory (each replication runs
// on it), with its metadata and prefix block size.
func LoadRequests(path string) ([]trace.Request, trace.Meta, int, error) {
	src, err := trace.Open(path, nil)
	if err != nil {
		return nil, trace.Meta{}, 0, err
	}
	defer src.Close()
	rr, err := trace.NewRequestReader(src)
	if err != nil {
		return nil, trace.Meta{}, 0, err
	}
	md := src.Meta()
	pb := 0
	if v := md.Get(trace.MetaPrefixBlockSize); v != "" {
		if pb, err = strconv.Atoi(v); err != nil || pb < 1 {
			return nil, md, 0, fmt.Errorf("%s: schema metadata %s: expected a positive integer, found %q", path, trace.MetaPrefixBlockSize, v)
		}
	}
	var all, buf []trace.Request
	for {
		buf, err = rr.Next(buf)
		for i := range buf {
			all = append(all, cloneReq(&buf[i]))
		}
		if err == io.EOF {
			return all, md, pb, nil
		}
		if err != nil {
			return nil, md, 0, err
		}
	}
}

// runSeed simulates one replication with decisions and anomalies written
// to the artifacts directory, and returns its metrics.
func runSeed(o *Options, cfg config.Cluster, pol *bundle.Bundle, reqs []trace.Request, md trace.Meta, prefixBlock, i int, stop *interrupter) (map[string]float64, map[string]string, error) {
	setup, err := sim.New(cfg, pol)
	if err != nil {
		return nil, nil, invalid{err}
	}
	if rt := setup.Runtime; rt != nil {
		rt.LimitRunSteps(o.MaxRunSteps)
		stop.add(rt) // its Starlark calls are cancelled at the timeout
	}
	// The engine asks Policies.Err after each decision and step: the
	// timeout stops runs without Starlark as fast.
	prev := setup.Policies.Err
	setup.Policies.Err = func() error {
		if e := stop.err(); e != nil {
			return e
		}
		if prev != nil {
			return prev()
		}
		return nil
	}
	seed := cfg.Seed
	name := func(kind string) string {
		if o.Seeds == 1 {
			return filepath.Join(o.Artifacts, kind+".arrow")
		}
		return filepath.Join(o.Artifacts, fmt.Sprintf("%s-seed%d.arrow", kind, i))
	}
	paths := map[string]string{"results": name("results"), "decisions": name("decisions"), "anomalies": name("anomalies")}
	maxInFlight, err := md.MaxInFlight()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Requests, err)
	}
	unique, err := md.PrefixUnique()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.Requests, err)
	}
	run := &sim.Run{Source: engine.SliceSource(reqs), InputMeta: md, PrefixBlockSize: prefixBlock, MaxInFlight: maxInFlight, PrefixUnique: unique, Path: o.Requests,
		Stage:     trace.Stage{Tool: "blis-eval", Version: trace.Version, Args: o.Args, Seed: &seed},
		Results:   sim.Output{Path: paths["results"]},
		Decisions: sim.Output{Path: paths["decisions"]},
		Anomalies: sim.Output{Path: paths["anomalies"]},
		Trace: sim.Trace{Level: decision.Decisions, SLOs: o.Fitness.SLOs(),
			Regret: decision.RegretConfig{Sample: o.RegretSample, Seed: seed}}}
	// An autoscaled run's GPU-hours and cost come from its scale events.
	if setup.Cfg.Autoscaled() {
		paths["scale_events"] = name("scale_events")
		run.ScaleEvents = sim.Output{Path: paths["scale_events"]}
	}
	res, err := setup.Run(run)
	if err != nil {
		var re *trace.RowError
		var oe *sim.OutputError
		switch {
		case errors.As(err, &re):
			return nil, nil, err // the harness's requests table
		case errors.As(err, &oe) || res == nil:
			return nil, nil, err // the evaluator's own outputs or options: exit 2
		}
		return nil, nil, invalid{err}
	}
	rec := res.Recorder
	m, err := collect(o.Fitness, paths["results"], paths["scale_events"], paths["anomalies"])
	if err != nil {
		return nil, nil, err
	}
	st := rec.Stats()
	m["shadow_divergence_rate"] = st.ShadowDivergenceRate()
	m["route_holds"] = float64(st.Held)
	var all int64
	for _, t := range trace.AnomalyTypes {
		m["anomalies."+t] = float64(st.Anomalies[t])
		all += st.Anomalies[t]
	}
	m["anomalies"] = float64(all)
	if o.RegretSample > 0 {
		m["regret_mean_ms"] = math.NaN()
		if st.RegretSamples > 0 {
			m["regret_mean_ms"] = st.RegretMeanUS / 1000
		}
	}
	return m, paths, nil
}

// standard metrics reported besides the spec's own.
var standard = []string{"throughput", "output_throughput", "completed_fraction", "ttft_p50", "ttft_p99", "tpot_p99", "e2e_p99",
	"cache_hit_rate", "preemption_rate", "goodput", "slo_attainment", "jain_fairness", "gpu_hours", "cost_usd",
	"rejection_rate", "scale_ups", "scale_downs", "scale_oscillations", "cache_hit_rate_gpu", "cache_hit_rate_cpu", "cache_hit_rate_storage",
	"router_wait_rate", "router_wait_mean"}

func collect(spec *fitness.Spec, results, scaleEvents, anomalies string) (map[string]float64, error) {
	ms, err := fitness.Collect([]string{results}, spec, fitness.Side{ScaleEvents: scaleEvents, Anomalies: anomalies})
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for k, v := range ms[0] {
		m[k] = v
	}
	rep, err := report.Build([]string{results}, report.Options{SLOs: spec.SLOs(), ScaleEvents: scaleEvents})
	if err != nil {
		return nil, err
	}
	for _, n := range standard {
		if _, ok := m[n]; ok {
			continue
		}
		if v, err := rep.Metric(0, n, "", ""); err == nil {
			m[n] = v
		}
	}
	return m, nil
}

// aggregate sets each metric's mean and, over several seeds, its 95%
// confidence interval (Student's t).
func (o *Output) aggregate(per []map[string]float64) {
	keys := map[string]bool{}
	for _, m := range per {
		for k := range m {
			keys[k] = true
		}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	if len(per) > 1 {
		o.CI95 = map[string][2]fitness.Float{}
	}
	for _, k := range names {
		xs := make([]float64, 0, len(per))
		for _, m := range per {
			v, ok := m[k]
			if !ok {
				v = math.NaN()
			}
			xs = append(xs, v)
		}
		mean := stat.Mean(xs, nil)
		o.Metrics[k] = fitness.Float(mean)
		if len(xs) > 1 {
			sd := stat.StdDev(xs, nil)
			t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(xs) - 1)}.Quantile(0.975)
			h := t * sd / math.Sqrt(float64(len(xs)))
			o.CI95[k] = [2]fitness.Float{fitness.Float(mean - h), fitness.Float(mean + h)}
		}
	}
}

// interrupter stops an evaluation's runs from the timeout's goroutine.
type interrupter struct {
	stopped atomic.Pointer[error]
	mu      sync.Mutex
	rts     []*bundle.Runtime
}

func (s *interrupter) err() error {
	if e := s.stopped.Load(); e != nil {
		return *e
	}
	return nil
}

// add registers a run's policy runtime (interrupted at once if the
// evaluation already was).
func (s *interrupter) add(rt *bundle.Runtime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rts = append(s.rts, rt)
	if e := s.err(); e != nil {
		rt.Interrupt(e)
	}
}

func (s *interrupter) stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped.CompareAndSwap(nil, &err) {
		return
	}
	for _, rt := range s.rts {
		rt.Interrupt(err)
	}
}

// identical reports whether every replication gave the same value of every
// metric (NaNs count as equal).
func identical(per []map[string]float64) bool {
	for k, v := range per[0] {
		for _, m := range per[1:] {
			w, ok := m[k]
			if !ok || (w != v && !(math.IsNaN(w) && math.IsNaN(v))) {
				return false
			}
		}
	}
	return true
}
