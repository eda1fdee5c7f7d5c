package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/synth"
	"github.com/blis-sim/blis/lib/trace"
)

// Record is what a run leaves behind: its summary, one metrics row per
// report group. It is all the sweep keeps of a run (unless results are
// kept too), so memory and disk follow the number of runs, not requests.
type Record struct {
	ID           string        `json:"run_id"`
	Format       int           `json:"format"`
	Error        string        `json:"error,omitempty"`
	LatencyModel string        `json:"latency_model,omitempty"`
	Groups       []GroupRecord `json:"groups,omitempty"`
}

// GroupRecord is one report group's metrics (nil = undefined).
type GroupRecord struct {
	Group   string              `json:"group"`
	Metrics map[string]*float64 `json:"metrics"`
}

// recordFormat changes when records or metrics change meaning: it is part of
// every run id, so old records are not reused.
const recordFormat = 1

// runner executes runs; it is safe for concurrent use.
type runner struct {
	spec   *Spec
	slos   *slo.Set
	traces *traceCache
	keep   string // directory for results tables ("" = discard)
}

func newRunner(s *Spec, keep string) (*runner, error) {
	slos, err := slo.Parse(s.Report.SLO)
	if err != nil {
		return nil, err
	}
	return &runner{spec: s, slos: slos, traces: newTraceCache(4 << 20), keep: keep}, nil
}

// errInput marks errors that the same inputs would repeat: the run is
// recorded as failed rather than retried.
type errInput struct{ err error }

func (e *errInput) Error() string { return e.err.Error() }
func (e *errInput) Unwrap() error { return e.err }

// run simulates one run and summarises it. A failure that comes from the
// run's inputs (a request the engine refuses, a config the latency model
// cannot build) is returned as a Record with Error; other failures (a
// file that vanished) as an error.
func (x *runner) run(r *Run) (*Record, error) {
	rec := &Record{ID: r.ID, Format: recordFormat}
	if r.Invalid != "" {
		rec.Error = r.Invalid
		return rec, nil
	}
	var results bytes.Buffer
	model, err := x.simulate(r, &results)
	if err != nil {
		var ie *errInput
		if errors.As(err, &ie) {
			rec.Error = ie.Error()
			return rec, nil
		}
		return nil, err
	}
	rec.LatencyModel = model
	if x.keep != "" {
		if err := writeFileAtomic(resultsPath(x.keep, r.ID), results.Bytes()); err != nil {
			return nil, err
		}
	}
	rep, err := report.Build([]string{"-"}, report.Options{By: x.spec.Report.By, SLOs: x.slos, Stdin: &results})
	if err != nil {
		return nil, fmt.Errorf("run %s: summarising: %w", r.ID[:12], err)
	}
	groups, vals, err := groupMetrics(rep, !x.slos.Empty())
	if err != nil {
		return nil, err
	}
	for i, g := range groups {
		gr := GroupRecord{Group: g, Metrics: map[string]*float64{}}
		for j, m := range Metrics {
			if v := vals[i][j]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				gr.Metrics[m.Name] = &v
			}
		}
		rec.Groups = append(rec.Groups, gr)
	}
	return rec, nil
}

// simulate runs the engine, writing the results table (an Arrow stream) to w.
func (x *runner) simulate(r *Run, w io.Writer) (string, error) {
	var run sim.Run
	switch r.workload.kind {
	case "trace":
		reqs, release, err := x.traces.get(r.wkey, r.workload.trace)
		if err != nil {
			return "", err
		}
		defer release()
		run = sim.Run{Source: sliceSource(reqs.rows, reqs.sorted), PrefixBlockSize: reqs.prefixBlock,
			MaxInFlight: reqs.maxInFlight, PrefixUnique: reqs.prefixUnique, Path: reqs.path}
	case "synth":
		sp, err := synth.Parse(r.workload.spec, r.workload.name, r.workload.dir)
		if err != nil {
			return "", &errInput{err}
		}
		ss := synthSource{synth.NewStream(sp)}
		defer ss.Close()
		run = sim.Run{Source: ss, PrefixBlockSize: sp.PrefixBlockSize, MaxInFlight: sp.MaxInFlight,
			PrefixUnique: sp.PrefixUnique(), Path: r.workload.name}
	}
	md := trace.NewMeta()
	schema := trace.ResultsSchema(md)
	sink, err := trace.Create("-", w, schema)
	if err != nil {
		return "", err
	}
	rw := trace.NewResultWriter(sink, schema)
	run.Results = sim.Output{Sink: rw}
	model, runErr := r.cluster.simulate(&run)
	if runErr != nil {
		rw.Abort()
		if badinput.Is(runErr) || model == "" {
			// Bad rows and configs the latency model refuses repeat on a rerun.
			return "", &errInput{runErr}
		}
		return "", runErr
	}
	if err := rw.Close(); err != nil {
		return "", err
	}
	return model, nil
}

// traceCache keeps converted traces in memory while runs use them, evicting
// the least recently used when the rows held pass a budget.
type traceCache struct {
	mu      sync.Mutex
	budget  int
	held    int
	tick    int64
	entries map[string]*traceEntry
}

type traceEntry struct {
	once  sync.Once
	reqs  *requests
	err   error
	users int
	used  int64
}

func newTraceCache(rows int) *traceCache {
	return &traceCache{budget: rows, entries: map[string]*traceEntry{}}
}

func (c *traceCache) get(key string, o traceOptions) (*requests, func(), error) {
	c.mu.Lock()
	e := c.entries[key]
	if e == nil {
		e = &traceEntry{}
		c.entries[key] = e
	}
	e.users++
	c.tick++
	e.used = c.tick
	c.mu.Unlock()
	e.once.Do(func() {
		e.reqs, e.err = loadTrace(o)
		if e.err != nil {
			e.err = &errInput{e.err}
		}
		c.mu.Lock()
		if e.reqs != nil {
			c.held += len(e.reqs.rows)
		}
		c.mu.Unlock()
	})
	release := func() {
		c.mu.Lock()
		e.users--
		c.evict()
		c.mu.Unlock()
	}
	if e.err != nil {
		release()
		return nil, nil, e.err
	}
	return e.reqs, release, nil
}

// evict drops unused entries, oldest first, while over budget.
func (c *traceCache) evict() {
	for c.held > c.budget {
		var oldest string
		var ot int64 = math.MaxInt64
		for k, e := range c.entries {
			if e.users == 0 && e.used < ot && e.reqs != nil {
				oldest, ot = k, e.used
			}
		}
		if oldest == "" {
			return
		}
		c.held -= len(c.entries[oldest].reqs.rows)
		delete(c.entries, oldest)
	}
}

// synthSource streams a synthesised workload into the engine
// (synth.Stream), marking the generator's errors as ones a rerun repeats.
type synthSource struct{ *synth.Stream }

func (s synthSource) Next(buf []trace.Request) ([]trace.Request, error) {
	b, err := s.Stream.Next(buf)
	if err != nil && err != io.EOF && !badinput.Is(err) {
		err = &errInput{err}
	}
	return b, err
}
