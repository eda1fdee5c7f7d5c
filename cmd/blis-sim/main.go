// Command blis-sim simulates a cluster of LLM serving replicas on a requests
// table and writes the results table. Flags and wiring only: the run is
// lib/sim's, the simulator lib/engine.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/internal/clusterflags"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:      "blis-sim",
		Usage:     "simulate LLM serving replicas behind a router on a requests table (flags override the --cluster YAML)",
		UsageText: "blis-sim [--cluster cluster.yaml] [flags] [FILE|-] > results.arrow",
		Description: "Reads a requests table (Arrow IPC stream, .arrow file or .parquet, gzipped or not; or stdin), simulates\n" +
			"the cluster and writes the results table (one row per request) to stdout or -o (.arrow, .parquet or a\n" +
			"stream, as --steps). Flags override the YAML.\n" +
			"See docs/engine.md and docs/policies.md.",
		HideHelpCommand: true,
		Flags: append(append(clusterflags.Flags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "results output (`FILE`, - for stdout)"},
			clusterflags.PolicyFlag(),
			&cli.BoolFlag{Name: "list-policies", Usage: "list every policy template with its parameters and ranges, and exit"},
			&cli.StringFlag{Name: "horizon", Usage: "stop at this simulated time (e.g. 10m, or seconds; 0 = run to the end)", DefaultText: "0"},
			&cli.StringFlag{Name: "snapshot-interval", Usage: "refresh the router's view of the instances this often (0 = live)", DefaultText: "0"},
			&cli.StringFlag{Name: "kv-event-delay", Usage: "the router hears the replicas' KV-cache events this late (its prefix index, cached_blocks; 0 = live)", DefaultText: "50ms"},
			&cli.StringFlag{Name: "client-timeout", Usage: "clients give up on requests not finished this long after arrival, unless a request has its own timeout_us (0 = never)", DefaultText: "0"},
			&cli.IntFlag{Name: "max-in-flight", Usage: "the client sends at most `N` requests at a time: a request whose time has come waits for one to end (0 = no cap)", DefaultText: "the table's blis.max_in_flight"},
			&cli.StringFlag{Name: "steps", Usage: "write the per-step table to `FILE`"},
			&cli.StringFlag{Name: "scale-events", Usage: "write the scale-events table (autoscaler decisions, replica lifecycle) to `FILE`"},
			&cli.BoolFlag{Name: "check-invariants", Usage: "assert the simulator's invariants while running"},
			&cli.BoolFlag{Name: "print-config", Usage: "print the effective config as YAML and exit"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no summary on stderr"},
			&cli.BoolFlag{Name: "progress", Usage: "print a progress line on stderr every few seconds even when it is not a terminal (CI, logs); on a terminal a bar is shown anyway"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the run to `FILE`", Hidden: true},
		), traceFlags()...),
		Action: run,
	}
}

func run(c *cli.Context) error {
	if c.Bool("list-policies") {
		listPolicies(c.App.Writer)
		return nil
	}
	setup, err := clusterflags.Setup(c)
	if err != nil {
		return err
	}
	if c.Bool("print-config") {
		fmt.Fprint(c.App.Writer, setup.Cfg.YAML())
		return nil
	}
	if err := checkPaths(c); err != nil {
		return err
	}
	path, err := cliutil.Input(c)
	if err != nil {
		return err
	}
	in, err := sim.OpenInput(path, os.Stdin)
	if err != nil {
		return err
	}
	defer in.Close()
	stderr, quiet := c.App.ErrWriter, c.Bool("quiet")
	seed := setup.Cfg.Seed
	r := &sim.Run{Source: in.Source, InputMeta: in.Meta, PrefixBlockSize: in.PrefixBlockSize, MaxInFlight: in.MaxInFlight, PrefixUnique: in.PrefixUnique, Path: in.Path,
		Stage:           trace.Stage{Tool: "blis-sim", Version: trace.Version, Args: os.Args[1:], Seed: &seed},
		LateInputs:      in.Inputs, // hashed beside the run
		Results:         sim.Output{Path: c.String("output"), W: c.App.Writer},
		Steps:           sim.Output{Path: c.String("steps"), Label: "--steps"},
		ScaleEvents:     sim.Output{Path: c.String("scale-events"), Label: "--scale-events"},
		CheckInvariants: c.Bool("check-invariants")}
	if c.IsSet("max-in-flight") {
		if r.MaxInFlight = c.Int("max-in-flight"); r.MaxInFlight < 0 {
			return cliutil.Usage("--max-in-flight: expected >= 0 (0 = no cap), found %d", r.MaxInFlight)
		}
	}
	if err := traceOptions(c, setup, r); err != nil {
		return err
	}
	prog := cliutil.NewProgress(stderr, "blis-sim", "requests", in.Total, c.Bool("progress"), quiet)
	if prog != nil {
		r.Progress = func(simUS, done int64) {
			prog.Update(done, "simulated "+(time.Duration(simUS/1e6)*time.Second).String())
		}
	}
	var start time.Time
	r.Started = func() {
		// Which latency model and why, once everything the run needs is
		// open: a bad input or output path is one line, not this and then the error.
		if !quiet {
			if in.InMemory {
				fmt.Fprintf(stderr, "blis-sim: %s is not marked %s=arrival: read %d rows into memory to sort them\n", in.Path, trace.MetaSorted, in.Total)
			}
			for _, w := range setup.Why {
				fmt.Fprintln(stderr, w)
			}
		}
		start = time.Now()
	}
	if p := c.String("cpuprofile"); p != "" {
		stop, err := cliutil.CPUProfile(p)
		if err != nil {
			return err
		}
		defer stop()
	}
	out, err := setup.Run(r)
	if err != nil {
		return runError(err)
	}
	prog.Finish(out.Summary.Injected)
	wall := time.Since(start)
	if out.Recorder != nil {
		// Asked for regret and got none: say so even with -q, rather than
		// leave the summary to suggest the flags just given.
		st := out.Recorder.Stats()
		if w := st.RegretWarning(r.Trace.Regret.Sample); w != "" {
			fmt.Fprintf(stderr, "blis-sim: warning: %s\n", w)
		}
	}
	if !quiet {
		md := trace.NewMeta()
		setup.Annotate(md)
		out.WriteSummary(stderr, setup, md.RouterLabel(), wall)
		if out.ClientWaits != nil {
			out.ClientWaits.WriteSummary(stderr)
		}
		if setup.Bundle != nil {
			fmt.Fprintf(stderr, "  %s\n", setup.Bundle.Describe())
		}
		if out.Recorder != nil {
			st := out.Recorder.Stats()
			fmt.Fprintf(stderr, "  %s\n", st.Describe())
		}
	}
	return out.ServedNothing()
}

// runError maps a run's error to its exit status: a bad path or a bad row
// is the user's (2); a failure to write is not.
func runError(err error) error {
	var oe *sim.OutputError
	var re *trace.RowError
	switch {
	case errors.As(err, &oe) && oe.Opening:
		return cliutil.Usage("%v", err)
	case errors.As(err, &re):
		return cliutil.BadInput(err)
	}
	return err
}

// checkPaths refuses flags after the input path and two outputs in one file.
func checkPaths(c *cli.Context) error {
	if c.NArg() > 1 {
		for _, a := range c.Args().Slice()[1:] {
			if strings.HasPrefix(a, "-") && a != "-" {
				return cliutil.Usage("flags go before the input path: blis-sim [flags] FILE (found %s after %s)", a, c.Args().First())
			}
		}
	}
	if o, st := c.String("output"), c.String("steps"); st != "" && o != "-" && o != "" && sameFile(o, st) {
		return cliutil.Usage("-o and --steps name the same file %s", o)
	}
	if se := c.String("scale-events"); se != "" {
		for _, f := range []string{"output", "steps"} {
			if o := c.String(f); o != "" && o != "-" && sameFile(o, se) {
				return cliutil.Usage("--%s and --scale-events name the same file %s", f, se)
			}
		}
	}
	return nil
}

func sameFile(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		if fb, err := os.Stat(b); err == nil {
			return os.SameFile(fa, fb)
		}
	}
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}
