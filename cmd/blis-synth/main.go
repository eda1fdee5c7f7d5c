// Command blis-synth turns a workload spec (YAML) into a requests table for
// blis-sim. See docs/workload.md.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/synth"
	"github.com/blis-sim/blis/lib/synth/infperf"
	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:      "blis-synth",
		Usage:     "synthesise a requests table from a workload spec",
		UsageText: "blis-synth [options] SPEC.yaml | blis-sim ...\nblis-synth [options] --example NAME | blis-sim ...",
		Description: "Reads a workload spec (YAML: clients, arrival processes, load profiles, conversations,\n" +
			"shared system prompts, tenant behaviour, agentic workflows) and writes the requests table.\n" +
			"Flags go before the spec file. See docs/workload.md.",
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "output `FILE` (.arrow/.feather IPC file, .parquet, anything else an Arrow IPC stream; - for stdout)"},
			&cli.StringFlag{Name: "example", Usage: "use the built-in example `NAME` instead of a spec file (see --list-examples)"},
			&cli.BoolFlag{Name: "list-examples", Usage: "list the built-in examples and exit"},
			&cli.BoolFlag{Name: "print-example", Usage: "print the YAML of --example and exit (a starting point for your own spec)"},
			&cli.Uint64Flag{Name: "seed", Usage: "override the spec's seed", DefaultText: "the spec's"},
			&cli.Int64Flag{Name: "num-requests", Usage: "override the spec's num_requests", DefaultText: "the spec's"},
			&cli.BoolFlag{Name: "check", Usage: "validate the spec and exit without writing"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "do not print the summary line on stderr"},
			&cli.StringFlag{Name: "fit", Usage: "propose a spec fitted to the requests table `TRACE` (a converted real trace): YAML to -o (default stdout), the trace's statistics beside the regenerated spec's on stderr"},
			&cli.Float64Flag{Name: "input-scale", Usage: "inference-perf configs: multiply every prompt length by `X` (older inference-perf versions' prompts re-tokenised a few percent longer than configured: the run's measured prompt_len over the configured one)", DefaultText: "1"},
		},
		Action: run,
	}
}

func run(c *cli.Context) error {
	if f := c.String("fit"); f != "" {
		return fit(c, f)
	}
	if c.Bool("list-examples") {
		for _, n := range synth.Examples() {
			fmt.Fprintf(c.App.Writer, "%-20s %s\n", n, synth.Describe(n))
		}
		return nil
	}
	var (
		spec   *synth.Spec
		inputs []trace.Input
		err    error
	)
	if name := c.String("example"); name != "" {
		if c.NArg() > 0 {
			return cliutil.Usage("give a spec file or --example, not both")
		}
		if c.Bool("print-example") {
			b, err := synth.ExampleSource(name)
			if err != nil {
				return cliutil.BadInput(err)
			}
			_, err = c.App.Writer.Write(b)
			return err
		}
		spec, err = synth.LoadExample(name)
		inputs = []trace.Input{{Path: "example:" + name}}
	} else {
		for _, a := range c.Args().Tail() {
			if strings.HasPrefix(a, "-") {
				return cliutil.Usage("flag %s after the spec file: flags go first (blis-synth -o out.arrow spec.yaml)", a)
			}
		}
		if c.NArg() != 1 {
			return cliutil.Usage("expected one spec file (or --example NAME; --list-examples shows them)")
		}
		path := c.Args().First()
		if b, rerr := os.ReadFile(path); rerr == nil && infperf.Looks(b) {
			return inferencePerf(c, path, b)
		}
		if c.IsSet("input-scale") {
			return cliutil.Usage("--input-scale applies to inference-perf configs only (%s is a BLIS workload spec)", path)
		}
		spec, err = synth.Load(path)
		if err == nil {
			var in trace.Input
			in, err = trace.DescribeInput(path)
			inputs = append(inputs, in)
		}
	}
	if err != nil {
		return cliutil.BadInput(err)
	}
	for _, p := range spec.Inputs {
		in, err := trace.DescribeInput(p)
		if err != nil {
			return cliutil.BadInput(err)
		}
		inputs = append(inputs, in)
	}
	if c.IsSet("seed") {
		spec.Seed = c.Uint64("seed")
	}
	if c.IsSet("num-requests") {
		if n := c.Int64("num-requests"); n <= 0 {
			return cliutil.Usage("--num-requests: expected > 0, found %d", n)
		}
		spec.NumRequests = c.Int64("num-requests")
	}
	if c.Bool("check") {
		fmt.Fprintf(c.App.ErrWriter, "blis-synth: spec is valid\n")
		return nil
	}
	st, err := synth.Write(spec, c.String("output"), c.App.Writer, synth.Meta(spec, os.Args[1:], inputs))
	if err != nil {
		return err
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(c.App.ErrWriter, "blis-synth: %s\n", st.Summary(spec))
	}
	return nil
}

// fit proposes a spec for a converted trace (docs/workload.md, "Fitting a
// spec to a trace").
func fit(c *cli.Context, path string) error {
	if c.NArg() > 0 || c.IsSet("example") {
		return cliutil.Usage("--fit takes the trace only (no spec file or --example)")
	}
	src, err := trace.Open(path, os.Stdin)
	if err != nil {
		return cliutil.BadInput(err)
	}
	rows, err := trace.ReadAllRequests(src)
	src.Close()
	if err != nil {
		return cliutil.BadInput(err)
	}
	y, err := synth.FitSpec(rows, path)
	if err != nil {
		return cliutil.BadInput(err)
	}
	spec, err := synth.Parse([]byte(y), "fitted spec", ".")
	if err != nil {
		return fmt.Errorf("the fitted spec does not parse (a bug): %w", err)
	}
	if out := c.String("output"); out != "-" {
		if err := os.WriteFile(out, []byte(y), 0o644); err != nil {
			return err
		}
	} else if _, err := c.App.Writer.Write([]byte(y)); err != nil {
		return err
	}
	if !c.Bool("quiet") {
		table, _, _, err := synth.FitComparison(rows, spec)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "blis-synth: fitted %d requests of %s; the trace beside the fitted spec regenerated:\n%s", len(rows), path, table)
	}
	return nil
}

// inferencePerf writes the requests an inference-perf config sends
// (docs/workload.md, "inference-perf configs").
func inferencePerf(c *cli.Context, path string, b []byte) error {
	if c.IsSet("num-requests") {
		return cliutil.Usage("--num-requests does not apply to inference-perf configs (their stages set the requests)")
	}
	cfg, err := infperf.Parse(b, path)
	if err != nil {
		return cliutil.BadInput(err)
	}
	opts := infperf.Options{Seed: c.Uint64("seed"), InputScale: 1}
	if c.IsSet("input-scale") {
		if opts.InputScale = c.Float64("input-scale"); !(opts.InputScale > 0) {
			return cliutil.Usage("--input-scale: expected a positive factor, found %g", opts.InputScale)
		}
	}
	t, err := cfg.Generate(opts)
	if err != nil {
		return cliutil.BadInput(err)
	}
	if !c.Bool("quiet") {
		for _, n := range t.Notes {
			fmt.Fprintf(c.App.ErrWriter, "blis-synth: note: %s\n", n)
		}
	}
	if c.Bool("check") {
		fmt.Fprintf(c.App.ErrWriter, "blis-synth: inference-perf config is valid: %s\n", t.Summary())
		return nil
	}
	in, err := trace.DescribeInput(path)
	if err != nil {
		return cliutil.BadInput(err)
	}
	seed := opts.Seed
	md := t.Meta(trace.NewMeta()).With(trace.Stage{Tool: "blis-synth", Version: trace.Version, Args: os.Args[1:], Seed: &seed, Inputs: []trace.Input{in}})
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(c.String("output"), c.App.Writer, schema)
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	w := trace.NewRequestWriter(sink, schema)
	for i := range t.Requests {
		if err := w.Write(&t.Requests[i]); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(c.App.ErrWriter, "blis-synth: inference-perf config: %s\n", t.Summary())
	}
	return nil
}
