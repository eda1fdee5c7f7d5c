package main

import (
	"bufio"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/fitness"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/summary"
	"github.com/blis-sim/blis/lib/trace"
)

// Fitness, Pareto ranking and the reflective summary (docs/evaluator.md).
func evalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "fitness", Usage: "fitness spec `FILE` (YAML): rank the runs by it"},
		&cli.BoolFlag{Name: "pareto", Usage: "with --fitness: Pareto ranks over the runs given (the default with several runs)"},
		&cli.BoolFlag{Name: "summary", Usage: "write the reflective summary (Markdown) of one run"},
		&cli.StringFlag{Name: "summary-strategy", Value: summary.IssueFocused, Usage: "summary strategy: " + strings.Join(summary.Strategies, ", ")},
		&cli.StringFlag{Name: "decisions", Usage: "decisions table of the run (--summary)"},
		&cli.StringFlag{Name: "anomalies", Usage: "anomalies table of the run (--summary)"},
	}
}

// output opens -o (or stdout) for text written through a temporary file.
func withOutput(c *cli.Context, write func(w *bufio.Writer) error) error {
	p := c.String("output")
	if p == "" || p == "-" {
		bw := bufio.NewWriter(os.Stdout)
		if err := write(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	out, err := trace.CreateFile(p)
	if err != nil {
		return cliutil.Usage("-o: %v", err)
	}
	bw := bufio.NewWriter(out.File())
	err = write(bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return out.Commit(err)
}

func runFitness(c *cli.Context, f report.Format) error {
	spec, err := fitness.Load(c.String("fitness"))
	if err != nil {
		return cliutil.BadInput(err)
	}
	paths := c.Args().Slice()
	if len(paths) == 0 {
		return cliutil.Usage("--fitness: no runs to rank: give results tables (blis-report --fitness f.yaml --pareto run1.arrow run2.arrow)")
	}
	labels := make([]string, len(paths))
	seen := map[string]bool{}
	for i, p := range paths {
		labels[i] = p
		if seen[p] {
			return cliutil.Usage("--fitness: %s given twice", p)
		}
		seen[p] = true
	}
	rs, err := fitness.Evaluate(paths, labels, spec, c.String("scale-events"))
	if err != nil {
		return cliutil.BadInput(err)
	}
	name := spec.Name
	if name == "" {
		name = c.String("fitness")
	}
	rk := fitness.NewRanking(name, rs)
	if p := c.String("html"); p != "" {
		out, err := trace.CreateFile(p)
		if err != nil {
			return cliutil.Usage("--html: %v", err)
		}
		bw := bufio.NewWriter(out.File())
		err = rk.WriteHTML(bw)
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		if err := out.Commit(err); err != nil {
			return err
		}
	}
	return withOutput(c, func(w *bufio.Writer) error {
		switch f {
		case report.FormatJSON:
			return rk.WriteJSON(w)
		case report.FormatMarkdown:
			return rk.WriteText(w, true)
		case report.FormatTable:
			return rk.WriteText(w, false)
		}
		return cliutil.Usage("--fitness: --format %s is not supported: use table, markdown or json", f)
	})
}

func runSummary(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usage("--summary: expected one results table, found %d", c.NArg())
	}
	slos, err := slo.Parse(c.StringSlice("slo"))
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	o := summary.Options{Results: c.Args().First(), Decisions: c.String("decisions"), Anomalies: c.String("anomalies"),
		SLOs: slos, Strategy: c.String("summary-strategy")}
	valid := false
	for _, s := range summary.Strategies {
		valid = valid || s == o.Strategy
	}
	if !valid {
		return cliutil.Usage("--summary-strategy %q: expected one of %s", o.Strategy, strings.Join(summary.Strategies, ", "))
	}
	if p := c.String("fitness"); p != "" {
		if o.Fitness, err = fitness.Load(p); err != nil {
			return cliutil.BadInput(err)
		}
	}
	return withOutput(c, func(w *bufio.Writer) error {
		if err := summary.Write(w, o); err != nil {
			return cliutil.BadInput(err)
		}
		return nil
	})
}
