package main

import (
	"bufio"
	"os"
	"strconv"
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
		&cli.StringFlag{Name: "decisions", Usage: "decisions table of the (first) run: regret and worst decisions in the --html page, or for --summary"},
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
	rs, err := fitness.Evaluate(paths, labels, spec, fitness.Side{ScaleEvents: c.String("scale-events"), Anomalies: c.String("anomalies")})
	if err != nil {
		return cliutil.BadInput(err)
	}
	name := spec.Name
	if name == "" {
		name = c.String("fitness")
	}
	rk := fitness.NewRanking(name, rs)
	if p := c.String("html"); p != "" {
		if err := paretoPage(rk).WriteHTMLFile(p); err != nil {
			return cliutil.Usage("--html: %v", err)
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

// paretoPage draws the ranking on its first two objectives (one objective:
// against the primary), at their raw values.
func paretoPage(rk *fitness.Ranking) *report.Pareto {
	pp := &report.Pareto{Title: rk.Spec,
		Note: "primary = weighted mean of the objectives normalised as ±value/scale (higher is better); front = Pareto rank 1"}
	if len(rk.Runs) == 0 || len(rk.Runs[0].Objectives) == 0 {
		return pp
	}
	o := rk.Runs[0].Objectives
	pp.X = report.ParetoAxis{Metric: o[0].Metric, Maximize: o[0].Direction == "maximize"}
	if len(o) > 1 {
		pp.Y = report.ParetoAxis{Metric: o[1].Metric, Maximize: o[1].Direction == "maximize"}
	} else {
		pp.Y = report.ParetoAxis{Metric: "primary", Maximize: true}
	}
	t := &report.Table{Name: "ranking", Title: "Ranking by " + rk.Spec, Columns: []string{"rank", "run", "front", "feasible", "primary"}}
	for _, v := range o {
		t.Columns = append(t.Columns, v.Metric)
	}
	for _, k := range rk.Runs[0].Checks {
		t.Columns = append(t.Columns, k.Constraint)
	}
	yesNo := map[bool]string{true: "yes", false: "no"}
	for _, r := range rk.Runs {
		q := report.ParetoPoint{Label: r.Run, X: float64(r.Objectives[0].Value), Rank: r.Rank, Front: r.Front, Feasible: r.Feasible,
			Primary: float64(r.Primary), Violations: r.Violations, Y: float64(r.Primary)}
		if len(r.Objectives) > 1 {
			q.Y = float64(r.Objectives[1].Value)
		}
		pp.Points = append(pp.Points, q)
		row := []report.Cell{{Num: float64(r.Rank), IsNum: true}, {Text: r.Run}, {Text: yesNo[r.Front]}, {Text: yesNo[r.Feasible]},
			{Num: float64(r.Primary), Prec: 4, IsNum: true}}
		for _, v := range r.Objectives {
			row = append(row, report.Cell{Num: float64(v.Value), Prec: 4, IsNum: true})
		}
		for _, k := range r.Checks {
			mark := "✓ "
			if !k.Holds {
				mark = "✗ "
			}
			row = append(row, report.Cell{Text: mark + strconv.FormatFloat(float64(k.Value), 'f', 4, 64)})
		}
		t.Rows = append(t.Rows, row)
	}
	pp.Table = t
	return pp
}
