package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/sweep"
)

// find runs a capacity search and prints one answer per combination of
// the other axes.
func find(c *cli.Context, spec *sweep.Spec, out string, f report.Format) error {
	goal := c.String("find")
	if goal != sweep.MinReplicas && goal != sweep.MaxRate {
		return cliutil.Usage("--find: expected %s or %s, found %q", sweep.MinReplicas, sweep.MaxRate, goal)
	}
	for _, fl := range []string{"slurm", "k8s-job", "collect", "shard-count", "dry-run"} {
		if c.IsSet(fl) {
			return cliutil.Usage("--find runs here and now (each probe depends on the ones before): it does not combine with --%s", fl)
		}
	}
	cons, err := sweep.ParseConstraints(c.StringSlice("slo"))
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	conf := c.Float64("confidence")
	if conf < 0 || conf >= 1 {
		return cliutil.Usage("--confidence: expected a level in [0, 1) such as 0.95, found %g", conf)
	}
	tol := c.Float64("tolerance")
	if tol <= 0 || tol >= 1 {
		return cliutil.Usage("--tolerance: expected a fraction in (0, 1) such as 0.02, found %g", tol)
	}
	stderr := c.App.ErrWriter
	o := sweep.FindOptions{Goal: goal, Constraints: cons, Axis: c.String("search-axis"), Tolerance: tol, Confidence: conf,
		Exec: sweep.Options{Out: out, Workers: workers(c), Force: c.Bool("force")}}
	if !c.Bool("quiet") {
		o.Log = func(s string) { fmt.Fprintf(stderr, "blis-sweep: %s\n", s) }
	}
	res, err := sweep.Find(spec, o)
	if err != nil {
		return cliutil.BadInput(err)
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(stderr, "blis-sweep: %d runs in %s", res.Runs, out)
		if len(spec.Report.SLO) == 0 && len(res.RequestSLO) > 0 {
			fmt.Fprintf(stderr, "; attainment judged per request against %s", strings.Join(res.RequestSLO, " "))
		}
		fmt.Fprintln(stderr)
		if len(res.Answers) > 1 {
			if i := res.Cheapest(); i >= 0 {
				a := res.Answers[i]
				what := fmt.Sprintf("%d GPUs", a.GPUs)
				if !math.IsNaN(a.Cost) {
					what = fmt.Sprintf("$%.2f per hour (%d GPUs)", a.Cost, a.GPUs)
				}
				fmt.Fprintf(stderr, "blis-sweep: cheapest: %s %s=%s at %s\n", res.ComboString(a), res.Axis.Name, sweep.ValueString(a.Value), what)
			}
		}
	}
	t := findTable(res)
	if p := c.String("html"); p != "" {
		if err := res.Capacity(conf, t).WriteHTMLFile(p); err != nil {
			return err
		}
	}
	if f == report.FormatCSV {
		return t.WriteWideCSV(c.App.Writer)
	}
	return (&report.Report{Tables: []*report.Table{t}}).Write(c.App.Writer, f)
}

func findTable(res *sweep.FindResult) *report.Table {
	t := &report.Table{Name: "find", Title: "Capacity search: " + res.Goal,
		Note: fmt.Sprintf("constraints judged on the mean over seeds and its %s; value = the answer (or, when not found, the probe that came closest)", "confidence interval")}
	var axes []int
	for i := range res.Spec.Axes {
		if i != res.AxisIdx {
			axes = append(axes, i)
			t.Columns = append(t.Columns, res.Spec.Axes[i].Name)
		}
	}
	t.Columns = append(t.Columns, res.Axis.Name, "found", "probes")
	for _, c := range res.Cons {
		t.Columns = append(t.Columns, c.Metric, "±")
	}
	t.Columns = append(t.Columns, "gpus")
	priced := res.Spec.Cost != nil
	if priced {
		t.Columns = append(t.Columns, "cost_per_hour")
	}
	t.Columns = append(t.Columns, "note")
	for _, a := range res.Answers {
		var row []report.Cell
		for _, i := range axes {
			row = append(row, report.Cell{Text: sweep.ValueString(a.Combo[i])})
		}
		found := "no"
		if a.Found {
			found = "yes"
		}
		row = append(row, report.Cell{Text: sweep.ValueString(a.Value)}, report.Cell{Text: found},
			report.Cell{Num: float64(a.Probes), IsNum: true})
		for i := range res.Cons {
			half := a.Verdict.Half[i]
			if a.Verdict.N < 2 {
				half = math.NaN() // one seed: no interval
			}
			row = append(row, report.Cell{Num: a.Verdict.Mean[i], Prec: 3, IsNum: true}, report.Cell{Num: half, Prec: 3, IsNum: true})
		}
		row = append(row, report.Cell{Num: float64(a.GPUs), IsNum: true})
		if priced {
			row = append(row, report.Cell{Num: a.Cost, Prec: 2, IsNum: true})
		}
		row = append(row, report.Cell{Text: a.Note})
		t.Rows = append(t.Rows, row)
	}
	return t
}
