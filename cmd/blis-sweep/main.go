// Command blis-sweep runs a sweep of simulations (a grid or a sample over
// cluster, policy and workload keys, with seeds as replications), on this
// machine or as a Slurm job array, and searches for capacity. Flags and
// wiring only: the logic is lib/sweep. See docs/sweep.md.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/sweep"
	"github.com/blis-sim/blis/lib/trace"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:      "blis-sweep",
		Usage:     "run a sweep of simulations, locally or as a Slurm job array, and search for capacity",
		UsageText: "blis-sweep [flags] sweep.yaml\n   blis-sweep --find min-replicas --slo 'p99_ttft<=500ms' sweep.yaml\n   blis-sweep --slurm --shards 8 --wait sweep.yaml",
		Description: "Runs every point of the sweep spec (docs/sweep.md) that has no result yet in the output\n" +
			"directory, then writes summary.parquet (one row per run) and points.parquet (mean and 95% CI\n" +
			"over seeds) there and prints the points. Results are content-addressed: a rerun skips what is done.",
		Version:         trace.Version,
		HideHelpCommand: true,
		// --slo values contain commas.
		DisableSliceFlagSeparator: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "output `DIR` (default: NAME.sweep in the current directory, NAME = the spec's name)"},
			&cli.IntFlag{Name: "jobs", Aliases: []string{"j"}, Usage: "runs in parallel (default: one per core; $SLURM_CPUS_PER_TASK in a Slurm task)"},
			&cli.BoolFlag{Name: "force", Usage: "run again runs that already have a result"},
			&cli.BoolFlag{Name: "keep-results", Usage: "also keep each run's results table (DIR/results/)"},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "print the plan (points, runs, done) and exit"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "output on stdout: table, markdown, csv or json"},
			&cli.StringSliceFlag{Name: "metric", Usage: "metric columns to print (repeatable; default: a handful)"},
			&cli.StringFlag{Name: "html", Usage: "also write a self-contained HTML page to `FILE`: the points plotted (as blis-report --html points.parquet), or with --find the capacity answer"},
			&cli.BoolFlag{Name: "progress", Usage: "print progress lines even when stderr is not a terminal"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress or summary on stderr"},

			&cli.StringFlag{Name: "shard-index", Usage: "run only shard `I` (default: $JOB_COMPLETION_INDEX, $SLURM_ARRAY_TASK_ID or $AWS_BATCH_JOB_ARRAY_INDEX when --shard-count is set)"},
			&cli.IntFlag{Name: "shard-count", Usage: "split the runs into `N` shards (run k is in shard k mod N)", DefaultText: "one"},
			&cli.BoolFlag{Name: "collect", Usage: "do not run: merge the results into the summary tables, or list the shards still missing"},

			&cli.StringFlag{Name: "find", Usage: "capacity search: min-replicas or max-rate"},
			&cli.StringSliceFlag{Name: "slo", Usage: `with --find: constraints "p99_ttft<=500ms,attainment>=0.99" (repeatable)`},
			&cli.StringFlag{Name: "search-axis", Usage: "with --find: the axis searched (default: the replicas axis, or workload.aggregate_rate / workload.speedup)"},
			&cli.Float64Flag{Name: "tolerance", Value: 0.02, Usage: "with --find max-rate: stop when the bracket is narrower than this fraction of the rate"},
			&cli.Float64Flag{Name: "confidence", Value: 0.95, Usage: "with --find and several seeds: a point meets the SLO when its CI at this level does (0 = decide on the mean)"},

			&cli.BoolFlag{Name: "slurm", Usage: "submit the runs as a Slurm job array (sbatch --array), one task per shard"},
			&cli.IntFlag{Name: "shards", Value: 0, Usage: "with --slurm or --k8s-job: number of shards (default: min(runs, 32))"},
			&cli.StringSliceFlag{Name: "sbatch-arg", Usage: "with --slurm: an extra sbatch argument such as --partition=gpu (repeatable)"},
			&cli.BoolFlag{Name: "wait", Usage: "with --slurm: wait for the job array, then collect"},
			&cli.StringFlag{Name: "exec", Usage: "with --slurm or --k8s-job: the command that runs blis-sweep on the nodes (default: this binary's absolute path; in a manifest: blis-sweep)"},

			&cli.BoolFlag{Name: "k8s-job", Usage: "print a Kubernetes Indexed Job manifest that runs the shards, and exit"},
			&cli.StringFlag{Name: "image", Value: "blis:latest", Usage: "with --k8s-job: the container image holding blis-sweep"},
			&cli.StringFlag{Name: "pvc", Value: "blis-sweep", Usage: "with --k8s-job: the PersistentVolumeClaim holding the spec, its inputs and the output directory"},
			&cli.StringFlag{Name: "mount", Value: "/work", Usage: "with --k8s-job: where the volume is mounted in the container"},
		},
		Action: run,
	}
}

func run(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usage("expected one sweep spec (a YAML file), found %d arguments (flags go before the spec)", c.NArg())
	}
	specPath := c.Args().First()
	if strings.HasPrefix(specPath, "-") {
		return cliutil.Usage("expected a sweep spec file, found %s", specPath)
	}
	f, err := report.ParseFormat(c.String("format"))
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	spec, err := sweep.Load(specPath)
	if err != nil {
		return cliutil.BadInput(err)
	}
	out := c.String("out")
	if out == "" {
		out = spec.Name + ".sweep"
	}
	stderr := c.App.ErrWriter
	quiet := c.Bool("quiet")

	if c.String("html") != "" {
		// The page is drawn from the summary tables: only runs that end by
		// collecting them (or a search) have one to write.
		for _, fl := range []string{"dry-run", "k8s-job", "shard-count"} {
			if c.IsSet(fl) && !(fl == "shard-count" && c.Bool("collect")) {
				return cliutil.Usage("--html draws the collected points: it does not combine with --%s (collect with --collect --html FILE)", fl)
			}
		}
		if c.Bool("slurm") && !c.Bool("wait") {
			return cliutil.Usage("--html with --slurm needs --wait (or collect later with --collect --html FILE)")
		}
	}
	if c.String("find") != "" {
		return find(c, spec, out, f)
	}
	plan, err := sweep.NewPlan(spec)
	if err != nil {
		return cliutil.BadInput(err)
	}
	if !quiet && plan.Duplicates > 0 {
		fmt.Fprintf(stderr, "blis-sweep: %d sampled points repeat earlier ones and were dropped\n", plan.Duplicates)
	}
	switch {
	case c.Bool("dry-run"):
		return printPlan(c.App.Writer, plan, out)
	case c.Bool("k8s-job"):
		return k8sJob(c, plan, specPath, out)
	case c.Bool("slurm"):
		return slurm(c, plan, specPath, out, f)
	case c.Bool("collect"):
		return collect(c, plan, out, f, c.Int("shard-count"))
	}
	o := sweep.Options{Out: out, Workers: workers(c), Force: c.Bool("force"), KeepResults: c.Bool("keep-results")}
	if n := c.Int("shard-count"); n > 0 {
		i, err := shardIndex(c)
		if err != nil {
			return err
		}
		o.ShardIndex, o.ShardCount = i, n
	} else if c.IsSet("shard-index") {
		return cliutil.Usage("--shard-index needs --shard-count")
	}
	st, err := execute(c, plan, o)
	if err != nil {
		return err
	}
	if o.ShardCount > 0 {
		// Other shards may still be running: the summary is --collect's job.
		return nil
	}
	if len(st.Errors) > 0 {
		return fmt.Errorf("%d runs could not run (rerun to retry them): first: %v", len(st.Errors), st.Errors[0])
	}
	return collect(c, plan, out, f, 0)
}

// workers is --jobs, else the CPUs Slurm gave the task, else one per core.
func workers(c *cli.Context) int {
	if c.IsSet("jobs") {
		return c.Int("jobs")
	}
	if v, err := strconv.Atoi(os.Getenv("SLURM_CPUS_PER_TASK")); err == nil && v > 0 {
		return v
	}
	return 0
}

// shardIndex is --shard-index, else the index a job array gives the task.
func shardIndex(c *cli.Context) (int, error) {
	v, from := c.String("shard-index"), "--shard-index"
	if v == "" {
		for _, e := range []string{"JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "AWS_BATCH_JOB_ARRAY_INDEX"} {
			if x := os.Getenv(e); x != "" {
				v, from = x, "$"+e
				break
			}
		}
	}
	if v == "" {
		return 0, cliutil.Usage("--shard-count needs --shard-index (or $JOB_COMPLETION_INDEX, $SLURM_ARRAY_TASK_ID, $AWS_BATCH_JOB_ARRAY_INDEX)")
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i >= c.Int("shard-count") {
		return 0, cliutil.Usage("%s: expected a shard index 0..%d, found %q", from, c.Int("shard-count")-1, v)
	}
	return i, nil
}

// execute runs the plan with a progress bar on a terminal (or progress
// lines with --progress) and a one-line account at the end.
func execute(c *cli.Context, plan *sweep.Plan, o sweep.Options) (sweep.Stats, error) {
	stderr := c.App.ErrWriter
	quiet := c.Bool("quiet")
	var bar *progressbar.ProgressBar
	tty := false
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		tty = true
	}
	lastLine := time.Now()
	if !quiet && (tty || c.Bool("progress")) {
		o.Progress = func(p sweep.Progress) {
			todo := p.Total - p.Skipped
			if tty {
				if bar == nil {
					bar = progressbar.NewOptions(todo, progressbar.OptionSetWriter(stderr), progressbar.OptionShowCount(),
						progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond),
						progressbar.OptionSetElapsedTime(true))
				}
				bar.Describe(fmt.Sprintf("runs (%d failed)", p.Failed))
				bar.Set(p.Done + p.Failed)
				return
			}
			if n := p.Done + p.Failed; time.Since(lastLine) >= 5*time.Second || n == todo {
				lastLine = time.Now()
				fmt.Fprintf(stderr, "blis-sweep: %d/%d runs, %d failed, %s elapsed, ETA %s\n", n, todo, p.Failed,
					p.Elapsed.Round(time.Second), p.ETA().Round(time.Second))
			}
		}
	}
	st, err := sweep.Execute(plan, o)
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return st, err
	}
	if !quiet {
		shard := ""
		if o.ShardCount > 0 {
			shard = fmt.Sprintf(" (shard %d of %d)", o.ShardIndex, o.ShardCount)
		}
		fmt.Fprintf(stderr, "blis-sweep: %d runs%s: %d run now, %d done before, %d failed, %d could not run; %s\n",
			st.Total, shard, st.Done+st.Failed, st.Skipped, st.Failed, len(st.Errors), st.Elapsed.Round(time.Millisecond))
		for i, e := range st.Errors {
			if i == 5 {
				fmt.Fprintf(stderr, "  ... and %d more\n", len(st.Errors)-5)
				break
			}
			fmt.Fprintf(stderr, "  %v\n", e)
		}
	}
	return st, nil
}

// collect merges the records into the summary tables and prints the points.
func collect(c *cli.Context, plan *sweep.Plan, out string, f report.Format, shardCount int) error {
	sum, err := sweep.Collect(plan, out)
	var me *sweep.MissingError
	if errors.As(err, &me) {
		if shardCount == 0 {
			shardCount = sweep.SlurmShards(out)
		}
		_, shards := sweep.Missing(plan, out, shardCount)
		msg := fmt.Sprintf("%s in %s", me.Error(), out)
		if shardCount > 0 {
			msg += fmt.Sprintf("; shards with missing runs (of %d): %s; blis-sweep --slurm submits only those again (or run --shard-index I --shard-count %d)",
				shardCount, joinInts(shards), shardCount)
		} else {
			msg += "; run blis-sweep again to run them"
		}
		return errors.New(msg)
	}
	if err != nil {
		return err
	}
	runsPath, pointsPath := filepath.Join(out, "summary.parquet"), filepath.Join(out, "points.parquet")
	runs := sum.RunsTable()
	defer runs.Release()
	if err := sweep.WriteTable(runsPath, runs); err != nil {
		return err
	}
	pts := sum.PointsTable()
	defer pts.Release()
	if err := sweep.WriteTable(pointsPath, pts); err != nil {
		return err
	}
	failed := 0
	for _, r := range sum.Records {
		if r.Error != "" {
			failed++
		}
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(c.App.ErrWriter, "blis-sweep: %d points, %d runs (%d failed): %s, %s\n", len(plan.Points), len(plan.Runs), failed, runsPath, pointsPath)
		if note := sum.IdenticalReplications(); note != "" {
			fmt.Fprintf(c.App.ErrWriter, "blis-sweep: note: %s\n", note)
		}
	}
	if p := c.String("html"); p != "" {
		t, err := report.ReadSweep(pointsPath)
		if err != nil {
			return err
		}
		if err := t.WriteHTMLFile(p, report.SweepOptions{Metrics: c.StringSlice("metric")}); err != nil {
			return err
		}
	}
	return printTable(c, pointsPath, f)
}

func printTable(c *cli.Context, path string, f report.Format) error {
	t, err := report.ReadSweep(path)
	if err != nil {
		return err
	}
	if f == report.FormatCSV {
		return t.WriteCSV(c.App.Writer)
	}
	short := f == report.FormatTable || f == report.FormatMarkdown
	rep, err := t.Report(report.SweepOptions{Metrics: c.StringSlice("metric"), ShortCI: short})
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	return rep.Write(c.App.Writer, f)
}

func printPlan(w io.Writer, plan *sweep.Plan, out string) error {
	done := 0
	for _, r := range plan.Runs {
		if sweep.HasRecord(out, r.ID) {
			done++
		}
	}
	fmt.Fprintf(w, "sweep %s: %d points × %d replications = %d runs, %d done in %s\n",
		plan.Spec.Name, len(plan.Points), max(1, len(plan.Spec.Seeds)), len(plan.Runs), done, out)
	for _, a := range plan.Spec.Axes {
		var vs []string
		for _, v := range a.Values {
			vs = append(vs, sweep.ValueString(v))
		}
		if a.Range != nil && len(vs) == 0 {
			vs = []string{fmt.Sprintf("%g..%g", a.Range.From, a.Range.To)}
		}
		fmt.Fprintf(w, "  %s: %s\n", a.Name, strings.Join(vs, ", "))
	}
	if s := plan.Spec.Seeds; len(s) > 0 {
		fmt.Fprintf(w, "  seed: %d..%d (%d replications)\n", s[0], s[len(s)-1], len(s))
	}
	for _, r := range plan.Runs {
		if r.Invalid != "" {
			fmt.Fprintf(w, "  point %d is not a valid config: %s\n", r.Point.Index, r.Invalid)
		}
	}
	return nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
