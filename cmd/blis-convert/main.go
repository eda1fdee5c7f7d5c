// Command blis-convert turns real LLM request traces into the BLIS requests
// table (an Arrow IPC stream on stdout, or -o FILE.arrow|.parquet).
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/convert"
	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

func main() {
	a := app()
	os.Args = append(os.Args[:1], permute(a.Flags, os.Args[1:])...)
	cliutil.Run(a)
}

// permute moves flags in front of positional arguments, so that
// `blis-convert trace.csv -o out.arrow` works (urfave/cli stops parsing
// flags at the first positional argument).
func permute(flags []cli.Flag, args []string) []string {
	boolean := map[string]bool{"help": true, "h": true, "version": true, "v": true}
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			for _, n := range f.Names() {
				boolean[n] = true
			}
		}
	}
	var fl, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			return append(append(fl, "--"), pos...)
		case a == "-" || !strings.HasPrefix(a, "-"):
			pos = append(pos, a)
		default:
			fl = append(fl, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && !boolean[name] && i+1 < len(args) {
				i++
				fl = append(fl, args[i])
			}
		}
	}
	if len(pos) > 0 {
		fl = append(fl, "--")
	}
	return append(fl, pos...)
}

func app() *cli.App {
	return &cli.App{
		Name:            "blis-convert",
		Usage:           "convert a real LLM request trace into the BLIS requests table",
		UsageText:       "blis-convert [--format F] [options] [FILE...|-] [-o OUT]\n\nformats (detected from content when --format is omitted):\n  " + strings.Join(convert.Formats, ", ") + "\nsee docs/convert.md",
		Version:         trace.Version,
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Usage: "input format (default: detect from the header or first JSON keys)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "output: - for an Arrow stream on stdout, or FILE.arrow / FILE.parquet"},
			&cli.BoolFlag{Name: "count", Usage: "print the number of rows (of an Arrow requests table, validated, or of the converted trace) instead of writing a table"},
			&cli.IntFlag{Name: "block-size", Usage: "tokens per prefix hash block (default: the format's: mooncake 512, qwen 16, weka from the file)"},
			&cli.StringFlag{Name: "start", Usage: "drop requests before this: a duration from the first request (10m) or an RFC 3339 time"},
			&cli.StringFlag{Name: "end", Usage: "stop at this: a duration from the first request (1h) or an RFC 3339 time (exclusive)"},
			&cli.Int64Flag{Name: "limit", Usage: "stop after N rows (a session in progress is completed)", DefaultText: "no limit"},
			&cli.Float64Flag{Name: "speedup", Value: 1, Usage: "divide arrival times and delays by X (recorded in blis.time_scale)"},
			&cli.Float64Flag{Name: "sample", Usage: "keep each request (with its session) with probability P (seeded by --seed)", DefaultText: "keep all"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of --sample"},
			&cli.StringFlag{Name: "filter-model", Usage: "keep only requests (sessions) whose model is exactly this"},
			&cli.BoolFlag{Name: "skip-bad", Usage: "skip malformed rows, printing the count per reason on stderr (default: stop at the first, exit 2)"},
			&cli.BoolFlag{Name: "sort", Usage: "buffer the whole trace and sort it by arrival (for traces out of order beyond the reorder window)"},
			&cli.StringFlag{Name: "sessions", Value: "open", Usage: "qwen: open (a child turn keeps its recorded arrival) or closed (it depends on its parent turn); otel: closed rebuilds each session's call DAG from timing"},
			&cli.DurationFlag{Name: "session-gap", Usage: "weka: start each further conversation file this long after the previous one"},
			&cli.StringFlag{Name: "time-col", Usage: "generic csv/jsonl: arrival time column"},
			&cli.StringFlag{Name: "input-col", Usage: "generic csv/jsonl: prompt token count column"},
			&cli.StringFlag{Name: "output-col", Usage: "generic csv/jsonl: output token count column"},
			&cli.StringFlag{Name: "time-unit", Value: "s", Usage: "generic csv/jsonl: unit of --time-col: s, ms, us, ns or iso"},
			&cli.StringFlag{Name: "id-col", Usage: "generic csv/jsonl: request id column"},
			&cli.StringFlag{Name: "model-col", Usage: "generic csv/jsonl: model column"},
			&cli.StringFlag{Name: "tenant-col", Usage: "generic csv/jsonl: tenant column"},
			&cli.StringFlag{Name: "lora-col", Usage: "generic csv/jsonl: LoRA adapter column (the requests' lora)"},
			&cli.StringFlag{Name: "session-col", Usage: "generic csv/jsonl: session column"},
		},
		Action: action,
	}
}

func action(c *cli.Context) error {
	inputs := c.Args().Slice()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	if s := c.String("sessions"); s != "open" && s != "closed" {
		return cliutil.Usage("--sessions: expected open or closed, found %q", s)
	}
	// The library reads 0 as "not set"; an explicit 0 on the command line is a mistake.
	if c.IsSet("speedup") && c.Float64("speedup") == 0 {
		return cliutil.Usage("--speedup: expected a positive factor, found 0")
	}
	if c.IsSet("sample") && c.Float64("sample") == 0 {
		return cliutil.Usage("--sample: expected a probability in (0, 1], found 0")
	}
	opts := convert.Options{
		Format: c.String("format"), Inputs: inputs, BlockSize: c.Int("block-size"),
		Start: c.String("start"), End: c.String("end"), Limit: c.Int64("limit"),
		Speedup: c.Float64("speedup"), Sample: c.Float64("sample"), Seed: c.Uint64("seed"),
		FilterModel: c.String("filter-model"), SkipBad: c.Bool("skip-bad"), Sort: c.Bool("sort"),
		Sessions: c.String("sessions"), SessionGap: c.Duration("session-gap").Microseconds(),
		Generic: convert.Generic{
			TimeCol: c.String("time-col"), InputCol: c.String("input-col"), OutputCol: c.String("output-col"),
			TimeUnit: c.String("time-unit"), IDCol: c.String("id-col"), ModelCol: c.String("model-col"),
			TenantCol: c.String("tenant-col"), SessionCol: c.String("session-col"), LoRACol: c.String("lora-col"),
		},
		Args: os.Args[1:], Tool: c.App.Name,
	}
	var (
		st  *convert.Stats
		err error
	)
	if c.Bool("count") {
		var n int64
		n, st, err = convert.Count(opts, os.Stdin)
		if err == nil {
			_, err = fmt.Fprintln(c.App.Writer, n)
		}
	} else {
		st, err = convert.Convert(opts, c.String("output"), os.Stdin, os.Stdout)
	}
	if st != nil {
		st.Report(c.App.Name, c.App.ErrWriter)
		if err == nil && st.Written == 0 && st.Read > 0 {
			fmt.Fprintf(c.App.ErrWriter, "%s: note: no rows kept: all %d requests read were removed by --start/--end/--sample/--filter-model\n", c.App.Name, st.Read)
		}
		if st.Reordered {
			fmt.Fprintf(c.App.ErrWriter, "%s: note: the trace was not in arrival order; it was buffered and sorted in memory\n", c.App.Name)
		} else if st.Regrouped {
			fmt.Fprintf(c.App.ErrWriter, "%s: note: session turns were interleaved with other sessions; the trace was buffered in memory to write each session after its first request\n", c.App.Name)
		}
	}
	return err
}
