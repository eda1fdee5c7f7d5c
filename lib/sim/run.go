package sim

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/blis-sim/blis/lib/decision"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// Run is one simulation of a Setup on a requests table, and where its
// tables go. Every output is created before the run (a bad path fails at
// once) and put in place only when the whole run succeeded: a failed run
// leaves no new file behind and existing ones as they were.
type Run struct {
	Source engine.Source
	// InputMeta is the requests table's metadata, carried to the results
	// (with Stage appended to its provenance); PrefixBlockSize its
	// blis.prefix_block_size (0: each deployment's block size).
	InputMeta       trace.Meta
	PrefixBlockSize int
	// Path names the input in error messages.
	Path string
	// MaxInFlight caps the client's requests in flight (0: no cap; the
	// table's blis.max_in_flight, Input.MaxInFlight): a request whose time
	// has come waits for a slot (client_wait_us).
	MaxInFlight int
	// PrefixUnique is the table's blis.prefix_unique promise
	// (Input.PrefixUnique; cluster.Options.PrefixUnique).
	PrefixUnique bool
	// Stage is this tool's entry in the outputs' provenance. LateInputs,
	// when set, names its inputs when a table's header is written (a
	// stream's with its first batch): a file's hash, computed beside the
	// run (Input.Inputs).
	Stage      trace.Stage
	LateInputs func() []trace.Input

	Results     Output // required
	Steps       Output // the per-step table
	ScaleEvents Output // autoscaler decisions and replica lifecycle
	Decisions   Output // the decision trace (Trace.Level > Minimal)
	Anomalies   Output
	Trace       Trace

	CheckInvariants bool
	// Progress, when set, hears the simulated time and the requests done
	// every few thousand events.
	Progress func(simUS, done int64)
	// Started, when set, is called once every output is open, just before
	// the simulation starts (a tool's messages then follow a bad path's
	// one-line error, never precede it).
	Started func()
}

// Output is where one table goes: a file (Path; "-" is W, a stream) or,
// for results only, a Go sink that receives every row (Sink). The zero
// Output writes nothing. Label names it in errors ("-o", "--steps").
type Output struct {
	Path  string
	W     io.Writer
	Sink  engine.Sink
	Label string
}

// Trace is what the decision recorder records: the level, candidates
// kept per routing row, SLO targets for slo_violation anomalies, and
// counterfactual regret.
type Trace struct {
	Level  decision.Level
	TopK   int
	SLOs   *slo.Set
	Regret decision.RegretConfig
}

// Outcome is what a run did.
type Outcome struct {
	Summary engine.Summary
	// Drops counts dropped and rejected requests per kind of reason.
	Drops trace.ReasonTally
	// Recorder is the decision recorder (nil when nothing was traced).
	Recorder *decision.Recorder
	// ClientWaits counts the waits for the client's slots (nil without a
	// cap).
	ClientWaits *ClientWaits
}

// OutputError is a failure to create, write or put in place an output
// table (a bad path, a full disk): the tool's, not the simulation's.
// Opening: the table could not be created (a bad path: the user's).
type OutputError struct {
	Err     error
	Opening bool
}

func (e *OutputError) Error() string { return e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// file is one output file in the making: created, written, then put in
// place (commit) or removed (abort).
type file struct {
	out    trace.Sink
	closer interface{ Close() error } // the table writer, flushed before commit
	abort  func()                     // the table writer's abort
}

// Run simulates the setup on r.Source and writes r's tables.
func (s *Setup) Run(r *Run) (*Outcome, error) {
	var files []*file
	var scaleOut trace.Sink
	abortAll := func() {
		for _, f := range files {
			if f.abort != nil {
				f.abort()
			}
			trace.Abort(f.out)
		}
		if scaleOut != nil {
			trace.Abort(scaleOut)
		}
	}
	// A table's schema is schemaOf the run's stage: its columns now, its
	// metadata's provenance once stage() is known.
	stage := sync.OnceValue(func() trace.Stage {
		st := r.Stage
		if r.LateInputs != nil {
			st.Inputs = r.LateInputs()
		}
		return st
	})
	create := func(o *Output, schemaOf func(trace.Stage) *arrow.Schema) (trace.Sink, *arrow.Schema, error) {
		schema := schemaOf(r.Stage)
		var final func() *arrow.Schema
		if r.LateInputs != nil {
			final = func() *arrow.Schema { return schemaOf(stage()) }
		}
		out, err := trace.CreateLate(o.Path, o.W, schema, final)
		if err != nil {
			abortAll()
			if o.Label != "" {
				err = fmt.Errorf("%s: %w", o.Label, err)
			}
			return nil, nil, &OutputError{Err: err, Opening: true}
		}
		return out, schema, nil
	}
	policyMeta := func(st trace.Stage) trace.Meta {
		md := trace.NewMeta().With(st)
		AnnotatePolicy(md, s.Bundle)
		return md
	}

	out := &Outcome{}
	opts := engine.Options{CheckInvariants: r.CheckInvariants, Path: r.Path, PrefixBlockSize: r.PrefixBlockSize,
		MaxInFlight: r.MaxInFlight, Progress: r.Progress, Policies: s.Policies, NoLeap: s.NoLeap, PrefixUnique: r.PrefixUnique}

	// Results.
	drops := &trace.DropCounter{W: r.Results.Sink}
	if r.Results.Path != "" {
		o, schema, err := create(&r.Results, func(st trace.Stage) *arrow.Schema {
			md := r.InputMeta.With(st)
			md.Delete(trace.MetaSorted) // results come in the order requests end
			md.Delete(trace.MetaPrefixUnique)
			s.Annotate(md)
			return trace.ResultsSchema(md)
		})
		if err != nil {
			return nil, err
		}
		rw := behind[trace.Result](trace.NewResultWriter(trace.Hold(o), schema))
		files = append(files, &file{out: o, closer: rw, abort: rw.Abort})
		drops.W = rw
	}
	if drops.W == nil {
		return nil, errors.New("sim.Run: no results output")
	}
	// Steps.
	if r.Steps.Path != "" {
		o, schema, err := create(&r.Steps, func(st trace.Stage) *arrow.Schema { return trace.StepsSchema(policyMeta(st)) })
		if err != nil {
			return nil, err
		}
		sw := behind[trace.Step](trace.NewStepWriter(trace.Hold(o), schema))
		files = append(files, &file{out: o, closer: sw, abort: sw.Abort})
		opts.Steps = sw
	}
	// Decisions and anomalies.
	var sink engine.Sink = drops
	if r.MaxInFlight > 0 {
		out.ClientWaits = &ClientWaits{W: drops, Limit: r.MaxInFlight}
		sink = out.ClientWaits
	}
	if r.Trace.Level > decision.Minimal || r.Decisions.Path != "" || r.Anomalies.Path != "" || r.Trace.Regret.Sample > 0 {
		inner := sink
		dcfg := decision.Config{Level: r.Trace.Level, TopK: r.Trace.TopK, SLOs: r.Trace.SLOs,
			PriorityName: s.Cfg.Router.Priority, Regret: r.Trace.Regret}
		meta := func(st trace.Stage) trace.Meta {
			md := trace.NewMeta().With(st)
			decision.DescribeRegret(md, dcfg.Regret)
			return md
		}
		if r.Decisions.Path != "" {
			o, schema, err := create(&r.Decisions, func(st trace.Stage) *arrow.Schema { return trace.DecisionsSchema(meta(st)) })
			if err != nil {
				return nil, err
			}
			dw := behind[trace.Decision](trace.NewDecisionWriter(trace.Hold(o), schema))
			files = append(files, &file{out: o, closer: dw, abort: dw.Abort})
			dcfg.Decisions = dw
		}
		if r.Anomalies.Path != "" {
			o, schema, err := create(&r.Anomalies, func(st trace.Stage) *arrow.Schema { return trace.AnomaliesSchema(meta(st)) })
			if err != nil {
				return nil, err
			}
			aw := trace.NewAnomalyWriter(trace.Hold(o), schema)
			files = append(files, &file{out: o, closer: aw, abort: aw.Abort})
			dcfg.Anomalies = aw
		}
		out.Recorder = decision.New(dcfg)
		out.Recorder.Attach(&opts)
		sink = out.Recorder.Sink(inner)
		if err := decision.CheckClonable(out.Recorder, &opts); err != nil {
			abortAll()
			return nil, err
		}
	}
	// Scale events: created now, written whole after the run.
	var scaleRows []row.ScaleEvent
	var scaleSchema *arrow.Schema
	if r.ScaleEvents.Path != "" {
		o, schema, err := create(&r.ScaleEvents, func(st trace.Stage) *arrow.Schema { return trace.ScaleEventsSchema(policyMeta(st)) })
		if err != nil {
			return nil, err
		}
		scaleOut, scaleSchema = o, schema
		opts.ScaleEventsTo = func(rows []row.ScaleEvent) { scaleRows = rows }
	}

	if r.Started != nil {
		r.Started()
	}
	sum, err := engine.Run(s.Cfg, s.Models, r.Source, sink, opts)
	out.Summary, out.Drops = sum, drops.Tally
	if err != nil {
		abortAll()
		return out, err
	}
	// Complete every table, then put them all in place.
	if out.Recorder != nil {
		err = out.Recorder.Close()
	}
	for _, f := range files {
		if f.closer != nil {
			if e := f.closer.Close(); err == nil {
				err = e
			}
		}
	}
	if err != nil {
		abortAll()
		return out, &OutputError{Err: err}
	}
	for i, f := range files {
		if err := f.out.Close(); err != nil {
			for _, g := range files[i+1:] {
				trace.Abort(g.out)
			}
			if scaleOut != nil {
				trace.Abort(scaleOut)
			}
			return out, &OutputError{Err: err}
		}
	}
	if scaleOut != nil {
		// Written whole now: a row per decision or lifecycle change.
		if err := trace.WriteScaleEvents(scaleOut, scaleSchema, scaleRows); err != nil {
			return out, &OutputError{Err: err}
		}
	}
	return out, nil
}

// behind writes a table on a goroutine of its own when there is a
// processor to spare (trace.Behind: the same bytes, the event loop freed of
// encoding them), else in the caller's.
func behind[T any](w trace.TableWriter[T]) trace.TableWriter[T] {
	if runtime.GOMAXPROCS(0) > 1 {
		return trace.NewBehind(w)
	}
	return w
}
