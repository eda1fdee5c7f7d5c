// Command blis-eval evaluates one policy candidate for a search loop
// (OpenEvolve, GEPA, random search): it simulates the cluster in-process,
// scores the run with a fitness spec and prints one JSON object. Flags and
// wiring only: the evaluator is lib/eval. See docs/evaluator.md.
package main

import (
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/eval"
	"github.com/blis-sim/blis/lib/fitness"
	"github.com/blis-sim/blis/lib/summary"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:      "blis-eval",
		Usage:     "evaluate a policy candidate: simulate, score with a fitness spec, print one JSON object",
		UsageText: "blis-eval --cluster c.yaml [--policy bundle.yaml] --fitness f.yaml [--seeds N] requests.arrow\n   blis-eval --cluster c.yaml --fitness f.yaml --workload spec.yaml [--seeds N]",
		Description: "Prints {valid, error?, fitness, primary, metrics, ci95?, seeds, notes?, summary, artifacts}. A candidate that\n" +
			"fails (its config does not load, the run fails, a constraint is violated, it runs past --timeout or\n" +
			"--max-run-steps) gives valid: false and exit 0; bad usage of blis-eval itself exits 2.",
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cluster", Aliases: []string{"c"}, Usage: "cluster YAML of the candidate", Required: true},
			&cli.StringFlag{Name: "policy", Usage: "policy bundle of the candidate (YAML: templates, decision trees, Starlark; docs/policies.md); default: the one the cluster file names, if any"},
			&cli.StringFlag{Name: "fitness", Aliases: []string{"f"}, Usage: "fitness spec YAML", Required: true},
			&cli.StringFlag{Name: "workload", Usage: "blis-synth workload spec, regenerated with seed+i for replication i (instead of a requests table)"},
			&cli.IntFlag{Name: "seeds", Value: 1, Usage: "seeded replications: metrics get their mean and 95% CI"},
			&cli.StringFlag{Name: "artifacts", Usage: "keep the results, decisions, anomalies and summary in `DIR` (their paths are in the JSON's artifacts)", DefaultText: "none kept: a temporary directory, removed on exit"},
			&cli.Float64Flag{Name: "regret-sample", Usage: "fraction of routing decisions replayed for counterfactual regret", DefaultText: "0, none"},
			&cli.StringFlag{Name: "summary-strategy", Value: summary.IssueFocused, Usage: "summary strategy: " + strings.Join(summary.Strategies, ", ")},
			&cli.StringFlag{Name: "timeout", Usage: "wall-clock budget of the whole evaluation (`DURATION`: 5s, 2m): past it the run stops and the candidate is valid: false", DefaultText: "none"},
			&cli.Uint64Flag{Name: "max-run-steps", Usage: "Starlark steps the candidate's policies may take in one replication, all stages and calls together (caps the bundle's sandbox.max_run_steps); over it the candidate is valid: false", DefaultText: "the bundle's, or none"},
		},
		Action: run,
	}
}

func run(c *cli.Context) error {
	spec, err := fitness.Load(c.String("fitness"))
	if err != nil {
		return cliutil.BadInput(err)
	}
	o := eval.Options{Cluster: c.String("cluster"), Policy: c.String("policy"), Fitness: spec, Workload: c.String("workload"),
		Seeds: c.Int("seeds"), Artifacts: c.String("artifacts"), RegretSample: c.Float64("regret-sample"),
		Strategy: c.String("summary-strategy"), Args: os.Args[1:], MaxRunSteps: c.Uint64("max-run-steps")}
	if s := c.String("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return cliutil.Usage("--timeout: expected a positive duration such as 5s or 2m, found %q", s)
		}
		o.Timeout = d
	}
	switch {
	case c.NArg() == 1:
		o.Requests = c.Args().First()
	case c.NArg() > 1:
		return cliutil.Usage("expected one requests table, found %d arguments (flags go before it)", c.NArg())
	case o.Workload == "":
		return cliutil.Usage("expected a requests table, or --workload SPEC")
	}
	if o.Requests != "" && o.Workload != "" {
		return cliutil.Usage("give a requests table or --workload, not both")
	}
	if o.Seeds < 1 {
		return cliutil.Usage("--seeds: expected >= 1, found %d", o.Seeds)
	}
	if r := o.RegretSample; r < 0 || r > 1 {
		return cliutil.Usage("--regret-sample: expected a fraction in [0, 1], found %g", r)
	}
	valid := false
	for _, s := range summary.Strategies {
		valid = valid || s == o.Strategy
	}
	if !valid {
		return cliutil.Usage("--summary-strategy %q: expected one of %s", o.Strategy, strings.Join(summary.Strategies, ", "))
	}
	out, err := eval.Run(o)
	if err != nil {
		return cliutil.BadInput(err)
	}
	e := json.NewEncoder(c.App.Writer)
	e.SetIndent("", "  ")
	return e.Encode(out)
}
