// Command blis-sim simulates a cluster of LLM serving replicas on a requests
// table and writes the results table. Flags and wiring only: the simulator
// is lib/engine.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/internal/clusterflags"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
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
			&cli.StringFlag{Name: "policy", Usage: "policy bundle `FILE` (YAML; overrides the cluster YAML's policy key; see docs/policies.md)"},
			&cli.BoolFlag{Name: "list-policies", Usage: "list every policy template with its parameters and ranges, and exit"},
			&cli.StringFlag{Name: "horizon", Usage: "stop at this simulated time (e.g. 10m, or seconds; 0 = run to the end)", DefaultText: "0"},
			&cli.StringFlag{Name: "snapshot-interval", Usage: "refresh the router's view of the instances this often (0 = live)", DefaultText: "0"},
			&cli.StringFlag{Name: "kv-event-delay", Usage: "the router hears the replicas' KV-cache events this late (its prefix index, cached_blocks; 0 = live)", DefaultText: "50ms"},
			&cli.StringFlag{Name: "client-timeout", Usage: "clients give up on requests not finished this long after arrival, unless a request has its own timeout_us (0 = never)", DefaultText: "0"},
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
	cfg, err := clusterflags.Config(c)
	if err != nil {
		return err
	}
	pb, err := loadPolicy(c, &cfg)
	if err != nil {
		return err
	}
	models, why, err := engine.Prepare(&cfg)
	if err != nil {
		return cliutil.BadInput(err)
	}
	if c.Bool("print-config") {
		fmt.Fprint(c.App.Writer, cfg.YAML())
		return nil
	}
	stderr := c.App.ErrWriter
	quiet := c.Bool("quiet")
	if !quiet {
		for _, w := range why {
			fmt.Fprintln(stderr, w)
		}
	}
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
	in, err := cliutil.Input(c)
	if err != nil {
		return err
	}
	src, err := trace.Open(in, os.Stdin)
	if err != nil {
		return cliutil.BadInput(err)
	}
	defer src.Close()
	rr, err := trace.NewRequestReader(src)
	if err != nil {
		return cliutil.BadInput(err)
	}
	md := src.Meta()
	opts := engine.Options{CheckInvariants: c.Bool("check-invariants"), Path: src.Path}
	if v := md.Get(trace.MetaPrefixBlockSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cliutil.Usage("%s: schema metadata %s: expected a positive integer, found %q", src.Path, trace.MetaPrefixBlockSize, v)
		}
		opts.PrefixBlockSize = n
	}
	var source engine.Source = rr
	// The progress line's total: the rows of a file, counted from the
	// message headers (a pipe has no total: no ETA then).
	total, _ := trace.CountRows(in)
	if md.Get(trace.MetaSorted) != "arrival" {
		tab, err := trace.ReadRequestTable(src)
		if err != nil {
			return cliutil.BadInput(err)
		}
		defer tab.Release()
		if !quiet {
			fmt.Fprintf(stderr, "blis-sim: %s is not marked %s=arrival: read %d rows into memory to sort them\n", src.Path, trace.MetaSorted, tab.Len())
		}
		source = engine.TableSource(tab)
		total = int64(tab.Len())
	}

	seed := cfg.Seed
	stage := trace.Stage{Tool: "blis-sim", Version: trace.Version, Args: os.Args[1:], Seed: &seed}
	if inp, err := trace.DescribeInput(in); err == nil {
		stage.Inputs = []trace.Input{inp}
	}
	// The bundle's policies for this run (made before the outputs, whose
	// metadata names them).
	var rt *bundle.Runtime
	if pb != nil {
		if rt, err = pb.Instantiate(&cfg); err != nil {
			return cliutil.BadInput(err)
		}
		opts.Policies = rt.Policies()
	}
	outMeta := md.With(stage)
	outMeta.Delete(trace.MetaSorted) // results come in the order requests end
	sim.Annotate(outMeta, &cfg, models)
	sim.AnnotateRouter(outMeta, &cfg, opts.Policies)
	// Both outputs are put into place only when the whole run succeeded: a
	// failed run leaves no new file behind and existing ones as they were.
	sim.AnnotatePolicy(outMeta, pb)
	out, err := trace.Create(c.String("output"), c.App.Writer, trace.ResultsSchema(outMeta))
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	rw := trace.NewResultWriter(trace.Hold(out), trace.ResultsSchema(outMeta))
	var sw *trace.StepWriter
	var stepsOut trace.Sink
	if p := c.String("steps"); p != "" {
		sm := trace.NewMeta().With(stage)
		sim.AnnotatePolicy(sm, pb)
		stepsOut, err = trace.Create(p, nil, trace.StepsSchema(sm))
		if err != nil {
			rw.Abort()
			trace.Abort(out)
			return cliutil.Usage("--steps: %v", err)
		}
		sw = trace.NewStepWriter(trace.Hold(stepsOut), trace.StepsSchema(sm))
		opts.Steps = sw
	}

	tr, err := setupTrace(c, &cfg, stage, &opts)
	if err != nil {
		rw.Abort()
		trace.Abort(out)
		if sw != nil {
			sw.Abort()
			trace.Abort(stepsOut)
		}
		return err
	}

	// The scale-events table is created before the run (a bad path fails at
	// once) and written whole after it: a row per decision or lifecycle change.
	var scaleRows []trace.ScaleEvent
	var scaleOut trace.Sink
	var scaleSchema *arrow.Schema
	if p := c.String("scale-events"); p != "" {
		sm := trace.NewMeta().With(stage)
		sim.AnnotatePolicy(sm, pb)
		scaleSchema = trace.ScaleEventsSchema(sm)
		if scaleOut, err = trace.Create(p, nil, scaleSchema); err != nil {
			rw.Abort()
			trace.Abort(out)
			tr.abort()
			if stepsOut != nil {
				sw.Abort()
				trace.Abort(stepsOut)
			}
			return cliutil.Usage("--scale-events: %v", err)
		}
		opts.ScaleEventsTo = func(rows []trace.ScaleEvent) { scaleRows = rows }
	}

	start := time.Now()
	prog := cliutil.NewProgress(stderr, "blis-sim", "requests", total, c.Bool("progress"), quiet)
	if prog != nil {
		opts.Progress = func(simUS, done int64) {
			prog.Update(done, "simulated "+(time.Duration(simUS/1e6)*time.Second).String())
		}
	}
	if p := c.String("cpuprofile"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	drops := &trace.DropCounter{W: rw}
	var sink engine.Sink = drops
	if tr != nil {
		sink = tr.rec.Sink(drops)
	}
	if pb != nil {
		var err error
		if tr != nil {
			err = tr.checkClonable(&opts)
		}
		if err != nil {
			rw.Abort()
			trace.Abort(out)
			if stepsOut != nil {
				sw.Abort()
				trace.Abort(stepsOut)
			}
			if scaleOut != nil {
				trace.Abort(scaleOut)
			}
			tr.abort()
			return cliutil.BadInput(err)
		}
	}
	sum, runErr := engine.Run(cfg, models, source, sink, opts)
	if runErr == nil {
		prog.Finish(sum.Injected)
	}
	wall := time.Since(start)
	var closeErr error
	if runErr == nil {
		closeErr = rw.Close()
		if sw != nil {
			if err := sw.Close(); closeErr == nil {
				closeErr = err
			}
		}
		if err := tr.finish(); closeErr == nil {
			closeErr = err
		}
	} else {
		rw.Abort()
		if sw != nil {
			sw.Abort()
		}
	}
	if runErr == nil && closeErr == nil {
		closeErr = out.Close()
		if stepsOut != nil {
			if closeErr != nil {
				trace.Abort(stepsOut)
			} else {
				closeErr = stepsOut.Close()
			}
		}
		if closeErr != nil {
			tr.abort()
		} else {
			closeErr = tr.commit()
		}
	} else {
		trace.Abort(out)
		if stepsOut != nil {
			trace.Abort(stepsOut)
		}
		tr.abort()
	}
	if scaleOut != nil {
		if runErr == nil && closeErr == nil {
			closeErr = trace.WriteScaleEvents(scaleOut, scaleSchema, scaleRows)
		} else {
			trace.Abort(scaleOut)
		}
	}
	if runErr != nil {
		var re *trace.RowError
		if errors.As(runErr, &re) {
			return cliutil.BadInput(runErr)
		}
		return runErr
	}
	if closeErr != nil {
		return closeErr
	}
	if !quiet {
		printSummary(stderr, &sum, &cfg, wall, &drops.Tally)
		if pb != nil {
			fmt.Fprintf(stderr, "  %s\n", pb.Describe())
		}
		if tr != nil {
			st := tr.rec.Stats()
			fmt.Fprintf(stderr, "  %s\n", st.Describe())
		}
	}
	return allDropped(&sum, &drops.Tally)
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
