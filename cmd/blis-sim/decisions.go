package main

import (
	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/decision"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/slo"
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

// traceOptions reads the trace flags into r: the decision recorder's
// level, top-k, SLOs and regret, and the decisions and anomalies tables
// (nothing when none asks for them: no cost).
func traceOptions(c *cli.Context, setup *sim.Setup, r *sim.Run) error {
	level, err := decision.ParseLevel(c.String("trace-level"))
	if err != nil {
		return cliutil.Usage("--trace-level: %v", err)
	}
	dp, ap := c.String("decisions"), c.String("anomalies")
	if dp != "" && !c.IsSet("trace-level") {
		level = decision.Decisions
	}
	if dp != "" && level == decision.Minimal {
		return cliutil.Usage("--decisions: --trace-level minimal records nothing: use decisions or full")
	}
	if level > decision.Minimal && dp == "" {
		return cliutil.Usage("--trace-level %s: name the decisions table with --decisions FILE", level)
	}
	sample := c.Float64("regret-sample")
	if sample < 0 || sample > 1 {
		return cliutil.Usage("--regret-sample: expected a fraction in [0, 1], found %g", sample)
	}
	if dp == "" && ap == "" && sample == 0 {
		return nil
	}
	slos, err := slo.Parse(c.StringSlice("slo"))
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	window := int64(decision.DefaultWindowUS)
	if c.IsSet("regret-window") {
		d, err := config.ParseDuration(c.String("regret-window"))
		if err != nil || d.US() <= 0 {
			return cliutil.Usage("--regret-window: expected a positive duration such as 2s, found %q", c.String("regret-window"))
		}
		window = d.US()
	}
	r.Trace = sim.Trace{Level: level, TopK: c.Int("top-k"), SLOs: slos,
		Regret: decision.RegretConfig{Sample: sample, Seed: setup.Cfg.Seed, WindowUS: window}}
	r.Decisions = sim.Output{Path: dp, Label: "--decisions"}
	r.Anomalies = sim.Output{Path: ap, Label: "--anomalies"}
	return nil
}
