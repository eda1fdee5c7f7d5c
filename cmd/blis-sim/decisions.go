package main

import (
	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/decision"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// Decision traces, anomalies and regret (docs/evaluator.md).
func traceFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "trace-level", Usage: "decision trace: minimal (nothing, no cost), decisions (admission, priority, routing, preemption rows) or full (and one batch row per step)", DefaultText: "minimal, or decisions with --decisions"},
		&cli.StringFlag{Name: "decisions", Usage: "write the decisions table to `FILE`"},
		&cli.StringFlag{Name: "anomalies", Usage: "write the anomalies table to `FILE`"},
		&cli.Float64Flag{Name: "regret-sample", Usage: "fraction of routing decisions replayed with each top-k alternative (counterfactual regret; seeded by --seed)", DefaultText: "0, none"},
		&cli.StringFlag{Name: "regret-window", Usage: "simulated time each counterfactual replay runs", DefaultText: "2s"},
		&cli.IntFlag{Name: "top-k", Usage: "candidates kept per routing row (and replayed for regret)", DefaultText: "3"},
		&cli.StringSliceFlag{Name: "slo", Usage: `latency targets for slo_violation anomalies: "ttft=200ms,tpot=50ms" or "interactive:ttft=200ms" (repeatable)`},
	}
}

// traceOutputs is what --decisions and --anomalies write to; like -o and
// --steps, they are put in place only when the whole run succeeded.
type traceOutputs struct {
	rec        *decision.Recorder
	dw         *trace.DecisionWriter
	aw         *trace.AnomalyWriter
	dOut, aOut trace.Sink
	level      decision.Level
}

// setupTrace reads the trace flags and, when any asks for it, attaches a
// decision recorder to opts (nil otherwise: no cost).
func setupTrace(c *cli.Context, cfg *config.Cluster, stage trace.Stage, opts *engine.Options) (*traceOutputs, error) {
	level, err := decision.ParseLevel(c.String("trace-level"))
	if err != nil {
		return nil, cliutil.Usage("--trace-level: %v", err)
	}
	t := &traceOutputs{level: level}
	dp, ap := c.String("decisions"), c.String("anomalies")
	if dp != "" && !c.IsSet("trace-level") {
		level = decision.Decisions
	}
	if dp != "" && level == decision.Minimal {
		return nil, cliutil.Usage("--decisions: --trace-level minimal records nothing: use decisions or full")
	}
	if level > decision.Minimal && dp == "" {
		return nil, cliutil.Usage("--trace-level %s: name the decisions table with --decisions FILE", level)
	}
	sample := c.Float64("regret-sample")
	if sample < 0 || sample > 1 {
		return nil, cliutil.Usage("--regret-sample: expected a fraction in [0, 1], found %g", sample)
	}
	if dp == "" && ap == "" && sample == 0 {
		return nil, nil
	}
	slos, err := slo.Parse(c.StringSlice("slo"))
	if err != nil {
		return nil, cliutil.Usage("%v", err)
	}
	var window int64
	if c.IsSet("regret-window") {
		d, err := config.ParseDuration(c.String("regret-window"))
		if err != nil || d.US() <= 0 {
			return nil, cliutil.Usage("--regret-window: expected a positive duration such as 2s, found %q", c.String("regret-window"))
		}
		window = d.US()
	}
	if window == 0 {
		window = decision.DefaultWindowUS
	}
	dcfg := decision.Config{Level: level, TopK: c.Int("top-k"), SLOs: slos, PriorityName: cfg.Router.Priority,
		Regret: decision.RegretConfig{Sample: sample, Seed: cfg.Seed, WindowUS: window}}
	md := trace.NewMeta().With(stage)
	decision.DescribeRegret(md, dcfg.Regret)
	if dp != "" {
		if t.dOut, err = trace.Create(dp, nil, trace.DecisionsSchema(md)); err != nil {
			return nil, cliutil.Usage("--decisions: %v", err)
		}
		t.dw = trace.NewDecisionWriter(trace.Hold(t.dOut), trace.DecisionsSchema(md))
		dcfg.Decisions = t.dw
	}
	if ap != "" {
		if t.aOut, err = trace.Create(ap, nil, trace.AnomaliesSchema(md)); err != nil {
			t.abort()
			return nil, cliutil.Usage("--anomalies: %v", err)
		}
		t.aw = trace.NewAnomalyWriter(trace.Hold(t.aOut), trace.AnomaliesSchema(md))
		dcfg.Anomalies = t.aw
	}
	t.rec = decision.New(dcfg)
	t.rec.Attach(opts)
	return t, nil
}

// finish ends the recorder and completes the tables (not yet in place).
func (t *traceOutputs) finish() error {
	if t == nil {
		return nil
	}
	err := t.rec.Close()
	if t.dw != nil {
		if e := t.dw.Close(); err == nil {
			err = e
		}
	}
	if t.aw != nil {
		if e := t.aw.Close(); err == nil {
			err = e
		}
	}
	return err
}

// commit puts the completed tables in place.
func (t *traceOutputs) commit() error {
	if t == nil {
		return nil
	}
	var err error
	for _, o := range []trace.Sink{t.dOut, t.aOut} {
		if o == nil {
			continue
		}
		if err != nil {
			trace.Abort(o)
			continue
		}
		err = o.Close()
	}
	return err
}

// abort leaves no new table behind (and existing files as they were).
func (t *traceOutputs) abort() {
	if t == nil {
		return
	}
	if t.dw != nil {
		t.dw.Abort()
	}
	if t.aw != nil {
		t.aw.Abort()
	}
	for _, o := range []trace.Sink{t.dOut, t.aOut} {
		if o != nil {
			trace.Abort(o)
		}
	}
}

// checkClonable refuses regret forks of a run whose policies came from a
// bundle: their state (Starlark state dicts, the bundle's tracker) is not
// cloned yet, so a fork would share it with the original and change it.
func (t *traceOutputs) checkClonable(opts *engine.Options) error {
	return decision.CheckClonable(t.rec, opts)
}
