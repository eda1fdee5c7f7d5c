package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/report"
)

// Sweep summaries (blis-sweep's summary.parquet and points.parquet) get
// their own view: the table of points, a wide CSV, and HTML plots of a
// metric against one or two axes.
func sweepFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "metric", Usage: "sweep summaries: metric columns to print and plot (repeatable)"},
		&cli.StringFlag{Name: "x", Usage: "sweep summaries: the axis on the x axis of the HTML plots"},
		&cli.StringFlag{Name: "lines", Usage: "sweep summaries: one line per value of this axis in the HTML plots"},
		&cli.StringFlag{Name: "group", Usage: "sweep summaries: the report group plotted (default all)"},
	}
}

func runSweep(c *cli.Context, path string, f report.Format) error {
	for _, fl := range []string{"by", "slo", "compare", "steps", "scale-events"} {
		if c.IsSet(fl) {
			return cliutil.Usage("--%s applies to results tables; %s is a sweep summary (its runs were reported with blis-sweep's report: options)", fl, path)
		}
	}
	t, err := report.ReadSweep(path)
	if err != nil {
		return cliutil.BadInput(err)
	}
	opt := report.SweepOptions{Metrics: c.StringSlice("metric"), X: c.String("x"), Lines: c.String("lines"), Group: c.String("group"),
		ShortCI: f == report.FormatTable || f == report.FormatMarkdown}
	if p := c.String("html"); p != "" {
		if err := t.WriteHTMLFile(p, opt); err != nil {
			return cliutil.BadInput(err)
		}
	}
	w := c.App.Writer
	if p := c.String("output"); p != "" && p != "-" {
		fo, err := os.Create(p)
		if err != nil {
			return err
		}
		defer fo.Close()
		w = fo
	}
	if f == report.FormatCSV {
		return t.WriteCSV(w)
	}
	rep, err := t.Report(opt)
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	return rep.Write(w, f)
}
