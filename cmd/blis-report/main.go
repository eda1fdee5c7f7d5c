// Command blis-report summarises results tables: terminal tables, Markdown,
// CSV, JSON and a self-contained HTML report. See docs/report.md.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/slo"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:      "blis-report",
		Usage:     "summarise blis-sim results: latency, throughput, SLOs, sessions, sim vs real",
		UsageText: "blis-report [flags] [results.arrow ...]   (stdin when no file is given)",
		// --slo values contain commas ("interactive:ttft=200ms,tpot=50ms"): splitting
		// them would make the second target global.
		DisableSliceFlagSeparator: true,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, markdown, csv or json"},
			&cli.StringFlag{Name: "by", Usage: "also group by " + strings.Join(report.GroupNames, "|")},
			&cli.StringSliceFlag{Name: "slo", Usage: `latency targets "ttft=200ms,tpot=50ms", or per class "interactive:ttft=200ms" (repeatable)`},
			&cli.StringFlag{Name: "compare", Usage: "reference results table: errors are relative to it"},
			&cli.StringFlag{Name: "steps", Usage: "steps table of the (first) run, for queue depth and busy time"},
			&cli.StringFlag{Name: "scale-events", Usage: "scale-events table of the run (blis-sim --scale-events): GPU-hours, cost, replicas over time"},
			&cli.StringFlag{Name: "html", Usage: "also write a self-contained HTML report to `FILE`"},
			&cli.StringFlag{Name: "session", Usage: "with --html: the session drawn as a timeline (default: the slowest complete one)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the report to `FILE` instead of stdout (- for stdout)"},
		}, append(sweepFlags(), evalFlags()...)...),
		Action: run,
	}
}

func run(c *cli.Context) error {
	f, err := report.ParseFormat(c.String("format"))
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	slos, err := slo.Parse(c.StringSlice("slo"))
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	// urfave/cli stops at the first file name, so a later flag would be read as an input.
	for _, a := range c.Args().Slice() {
		if len(a) > 1 && strings.HasPrefix(a, "-") {
			return cliutil.Usage("flag %s after the input files: flags go first (blis-report --html r.html results.arrow)", a)
		}
	}
	if c.Bool("summary") {
		return runSummary(c)
	}
	if c.String("fitness") != "" {
		return runFitness(c, f)
	}
	if c.Bool("pareto") {
		return cliutil.Usage("--pareto ranks runs by a fitness spec: give --fitness FILE")
	}
	if c.NArg() == 1 && report.IsSweepTable(c.Args().First()) {
		return runSweep(c, c.Args().First(), f)
	}
	by := c.String("by")
	if by != "" && report.GroupColumns[by] == "" {
		return cliutil.Usage("--by %q: expected one of %s", by, strings.Join(report.GroupNames, ", "))
	}
	page := c.String("html") != ""
	for _, fl := range []string{"decisions", "session"} {
		if c.IsSet(fl) && !page {
			return cliutil.Usage("--%s draws in the HTML page: give --html FILE too (or --summary for the reflective summary)", fl)
		}
	}
	rep, err := report.Build(c.Args().Slice(), report.Options{
		By: by, SLOs: slos, Compare: c.String("compare"), Steps: c.String("steps"), ScaleEvents: c.String("scale-events"), Stdin: os.Stdin,
		Charts: page, Decisions: c.String("decisions"), Session: c.String("session"),
	})
	if err != nil {
		return cliutil.BadInput(err)
	}
	for _, n := range rep.Notes { // also in the report, where a script may not look
		fmt.Fprintf(c.App.ErrWriter, "%s: note: %s\n", c.App.Name, n)
	}
	if p := c.String("html"); p != "" {
		if err := rep.WriteHTMLFile(p); err != nil {
			return err
		}
	}
	if p := c.String("output"); p != "" && p != "-" {
		return rep.WriteFile(p, f) // via a temporary name: a failed write leaves nothing
	}
	if err := rep.Write(os.Stdout, f); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}
