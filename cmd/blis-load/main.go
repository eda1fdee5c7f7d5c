// Command blis-load drives a real OpenAI-compatible server with a requests
// table, the way blis-sim replays it, and writes what happened as a results
// table. Flags and wiring only: the load generator is lib/load.
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/blis-sim/blis/lib/bug"
	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/load"
	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:      "blis-load",
		Metadata:  map[string]any{cliutil.OwnSignals: true}, // an interrupt drains the requests in flight
		Usage:     "drive an OpenAI-compatible server with a requests table and record what happened",
		UsageText: "blis-load --url http://HOST:PORT/v1 [flags] [FILE|-] > results.arrow",
		Description: "Sends the requests of a requests table (blis-convert, blis-synth) to a server, on the table's\n" +
			"timing (default), a Poisson stream (--rate), all at once (--offline) or a closed loop\n" +
			"(--concurrency), issuing sessions and agentic steps when their dependencies finish, as\n" +
			"blis-sim does. Writes a results table blis-report and blis-calibrate read. See docs/load.md.",
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Usage: "API base of the server, e.g. http://localhost:8000/v1 (required)"},
			&cli.StringFlag{Name: "api", Value: "completions", Usage: "completions (token-id prompts: exact lengths) or chat (text prompts: approximate lengths)"},
			&cli.StringFlag{Name: "model", Usage: "model to name in requests (default: the only model the server lists)"},
			&cli.StringFlag{Name: "api-key-env", Value: "OPENAI_API_KEY", Usage: "name of the environment `VAR` holding the API key (sent as a bearer token when set)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "results output (`FILE`, - for stdout; .arrow, .parquet or a stream)"},
			&cli.StringFlag{Name: "chunks", Usage: "also write every request's events (due, sent, each chunk, done or error) to `FILE`"},
			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Usage: "at most N requests in flight; alone, a closed loop (the next goes when one finishes)", DefaultText: "no limit"},
			&cli.Float64Flag{Name: "rate", Usage: "roots as a Poisson stream at R per second (instead of the table's arrival times)", DefaultText: "the table's times"},
			&cli.BoolFlag{Name: "offline", Usage: "every root at once at the start (maximum throughput)"},
			&cli.Float64Flag{Name: "speedup", Usage: "table timing: divide arrival_us and delay_us by X", DefaultText: "1"},
			&cli.StringFlag{Name: "duration", Usage: "stop issuing after this long (90s, 10m, or seconds)"},
			&cli.Int64Flag{Name: "limit", Usage: "use only the first N rows of the table (in arrival order)", DefaultText: "all"},
			&cli.IntFlag{Name: "warmup", Usage: "send N warm-up requests first (shaped like the first rows, not in the results)", DefaultText: "none"},
			&cli.StringFlag{Name: "client-timeout", Usage: "give up on a request not finished this long after it was sent, unless its row has timeout_us (0 = never)", DefaultText: "0"},
			&cli.StringFlag{Name: "drain", Value: "30s", Usage: "after --duration or an interrupt, wait this long for requests in flight"},
			&cli.StringFlag{Name: "ignore-eos", Value: "auto", Usage: "send vLLM's min_tokens and ignore_eos to force output lengths: auto (unless the server rejects them), on, off"},
			&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "seed of the Poisson arrivals and of the prompts (another seed: prompts no cache has seen)"},
			&cli.StringFlag{Name: "vocab-range", Value: fmt.Sprintf("%d:%d", load.DefaultTokenLo, load.DefaultTokenHi), Usage: "token ids of the prompts are drawn from `LO:HI`"},
			&cli.IntFlag{Name: "block-size", Value: 16, Usage: "tokens per prefix_hashes entry when the table's metadata does not say"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress line or summary on stderr"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the session to `FILE`", Hidden: true},
		},
		Action: run,
	}
}

type settings struct {
	target     load.Target
	ignoreEOS  load.Mode
	opts       load.Options
	keyVar     string
	input, out string
	chunks     string
	quiet      bool
}

func parseFlags(c *cli.Context) (*settings, error) {
	s := &settings{quiet: c.Bool("quiet"), out: c.String("output"), chunks: c.String("chunks"), keyVar: c.String("api-key-env")}
	if c.NArg() > 1 {
		for _, a := range c.Args().Slice()[1:] {
			if strings.HasPrefix(a, "-") && a != "-" {
				return nil, cliutil.Usage("flags go before the input path: blis-load [flags] FILE (found %s after %s)", a, c.Args().First())
			}
		}
	}
	in, err := cliutil.Input(c)
	if err != nil {
		return nil, err
	}
	s.input = in
	if s.target.URL = c.String("url"); s.target.URL == "" {
		return nil, cliutil.Usage("--url: required (the server's API base, e.g. http://localhost:8000/v1)")
	}
	switch api := load.API(c.String("api")); api {
	case load.Completions, load.Chat:
		s.target.API = api
	default:
		return nil, cliutil.Usage("--api: expected completions or chat, found %q", c.String("api"))
	}
	s.target.Model = c.String("model")
	switch m := load.Mode(c.String("ignore-eos")); m {
	case load.ModeAuto, load.ModeOn, load.ModeOff:
		s.ignoreEOS = m
	default:
		return nil, cliutil.Usage("--ignore-eos: expected auto, on or off, found %q", c.String("ignore-eos"))
	}
	if s.keyVar != "" {
		if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(s.keyVar) {
			return nil, cliutil.Usage("--api-key-env: expected the name of an environment variable (the key itself never goes on the command line), found %q", s.keyVar)
		}
		s.target.APIKey = os.Getenv(s.keyVar)
	}

	o := &s.opts
	n := 0
	for _, f := range []string{"rate", "offline"} {
		if c.IsSet(f) {
			n++
		}
	}
	if n > 1 {
		return nil, cliutil.Usage("--rate and --offline are different schedules: give one")
	}
	if c.IsSet("speedup") && n > 0 {
		return nil, cliutil.Usage("--speedup scales the table's timing: it does not combine with --rate or --offline")
	}
	switch {
	case c.IsSet("rate"):
		o.Timing, o.Rate = load.TimingPoisson, c.Float64("rate")
		if !(o.Rate > 0) || o.Rate > 1e6 {
			return nil, cliutil.Usage("--rate: expected requests per second in (0, 1e6], found %v", c.Float64("rate"))
		}
	case c.Bool("offline"):
		o.Timing = load.TimingOffline
	case c.IsSet("concurrency") && !c.IsSet("speedup"):
		o.Timing = load.TimingOffline // a closed loop
	default:
		o.Timing, o.Speedup = load.TimingTrace, 1
		if c.IsSet("speedup") {
			o.Speedup = c.Float64("speedup")
			if !(o.Speedup > 0) || o.Speedup > 1e9 {
				return nil, cliutil.Usage("--speedup: expected a factor > 0, found %v", c.Float64("speedup"))
			}
		}
	}
	if c.IsSet("concurrency") {
		if o.Concurrency = c.Int("concurrency"); o.Concurrency < 1 || o.Concurrency > 1e6 {
			return nil, cliutil.Usage("--concurrency: expected a number of requests in flight ≥ 1, found %d", c.Int("concurrency"))
		}
	}
	if o.Limit = c.Int64("limit"); o.Limit < 0 || c.IsSet("limit") && o.Limit == 0 {
		return nil, cliutil.Usage("--limit: expected a number of rows ≥ 1, found %d", o.Limit)
	}
	if o.Warmup = c.Int("warmup"); o.Warmup < 0 {
		return nil, cliutil.Usage("--warmup: expected a number of requests ≥ 0, found %d", o.Warmup)
	}
	for _, d := range []struct {
		flag string
		dst  *time.Duration
	}{{"duration", &o.Duration}, {"client-timeout", &o.ClientTimeout}, {"drain", &o.Drain}} {
		if v := c.String(d.flag); v != "" {
			if *d.dst, err = parseDuration(v); err != nil {
				return nil, cliutil.Usage("--%s: %v", d.flag, err)
			}
		}
	}
	if c.IsSet("duration") && o.Duration == 0 {
		return nil, cliutil.Usage("--duration: expected a duration > 0")
	}
	o.Seed = c.Uint64("seed")
	lo, hi, ok := strings.Cut(c.String("vocab-range"), ":")
	l, err1 := strconv.ParseUint(lo, 10, 32)
	h, err2 := strconv.ParseUint(hi, 10, 32)
	if !ok || err1 != nil || err2 != nil || h <= l {
		return nil, cliutil.Usage("--vocab-range: expected LO:HI with 0 ≤ LO < HI (token ids), found %q", c.String("vocab-range"))
	}
	o.Prompts = load.Prompts{Seed: o.Seed, BlockSize: c.Int("block-size"), Lo: uint32(l), Hi: uint32(h)}
	if o.Prompts.BlockSize < 1 {
		return nil, cliutil.Usage("--block-size: expected tokens ≥ 1, found %d", o.Prompts.BlockSize)
	}
	if s.chunks != "" && s.out != "-" && s.out != "" && sameFile(s.out, s.chunks) {
		return nil, cliutil.Usage("-o and --chunks name the same file %s", s.out)
	}
	return s, nil
}

var numberRE = regexp.MustCompile(`^[0-9]+(\.[0-9]*)?$`)

// parseDuration reads 90s, 10m, 1h30m or plain seconds, as blis-sim does.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if v, err := time.ParseDuration(s); err == nil && v >= 0 {
		return v, nil
	}
	if numberRE.MatchString(s) {
		secs, _ := strconv.ParseFloat(s, 64)
		return time.Duration(secs * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("expected a duration such as 90s, 10m or 1h (or seconds), found %q", s)
}

func run(c *cli.Context) error {
	s, err := parseFlags(c)
	if err != nil {
		return err
	}
	stderr := c.App.ErrWriter
	tab, err := load.OpenTable(s.input, os.Stdin)
	if err != nil {
		return cliutil.BadInput(err)
	}
	defer tab.Close()
	if tab.PrefixBlockSize > 0 {
		s.opts.Prompts.BlockSize = tab.PrefixBlockSize
	}
	// The table's client cap (blis.max_in_flight, as blis-synth writes it
	// for a benchmark's workers): its requests go at their times, at most N
	// in flight, as blis-sim replays them. --concurrency wins.
	if n, err := tab.Meta.MaxInFlight(); err != nil {
		return cliutil.BadInput(fmt.Errorf("%s: %w", tab.Path, err))
	} else if n > 0 && !c.IsSet("concurrency") && s.opts.Timing == load.TimingTrace {
		s.opts.Concurrency = n
	}
	st, err := tab.Check(s.opts.Limit, s.opts.Warmup)
	if err != nil {
		return cliutil.BadInput(err)
	}
	if st.LLM == 0 {
		return cliutil.Usage("%s: no usable rows: %s", tab.Path, describeRows(&st))
	}
	conns := s.opts.Concurrency
	if conns == 0 {
		conns = 1024 // connections kept open for reuse in an open loop
	}
	hc := load.NewHTTPClient(conns)
	ctx, cancelProbe := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	pr, err := load.Probe(ctx, hc, s.target, s.ignoreEOS)
	interrupted := ctx.Err() != nil
	cancelProbe()
	if interrupted {
		return cliutil.Usage("interrupted while probing %s: nothing was written", s.target.URL)
	}
	if err != nil {
		return err
	}
	s.target.Model, s.target.Ext = pr.Model, pr.Ext
	if !s.quiet {
		fmt.Fprintf(stderr, "blis-load: %s: %s\n", tab.Path, describeRows(&st))
		for _, n := range pr.Notes {
			fmt.Fprintf(stderr, "blis-load: %s\n", n)
		}
		fmt.Fprintf(stderr, "blis-load: %s %s, model %s, %s\n", s.target.API, s.target.Endpoint(), s.target.Model, schedule(&s.opts))
	}

	sess := load.NewSession(tab, &st, &s.target, hc, s.opts)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		defer bug.Catch()
		first := true
		for x := range sig {
			if first {
				first = false
				sess.Stop("interrupted (" + sigName(x) + ")")
				if !s.quiet {
					fmt.Fprintf(stderr, "\nblis-load: %s: no more requests; waiting up to %s for those in flight (again to stop now)\n", sigName(x), s.opts.Drain)
				}
				continue
			}
			sess.Abort()
		}
	}()
	if s.opts.Warmup > 0 {
		wu, err := sess.Warmup(context.Background())
		if err != nil {
			return err
		}
		if !s.quiet {
			line := fmt.Sprintf("blis-load: warm-up: %d of %d requests completed", wu.Completed, wu.Sent)
			if wu.FirstError != "" {
				line += "; first error: " + wu.FirstError
			}
			fmt.Fprintln(stderr, line)
		}
		if wu.Stopped {
			return cliutil.Usage("interrupted during the warm-up: nothing was written")
		}
	}

	start := time.Now().UTC()
	stage := trace.Stage{Tool: "blis-load", Version: trace.Version, Args: redactArgs(os.Args[1:]), Seed: &s.opts.Seed}
	if inp, err := trace.DescribeInput(s.input); err == nil {
		stage.Inputs = []trace.Input{inp}
	}
	md := tab.Meta.With(stage)
	setMeta(md, s, &pr, start)
	rschema := trace.ResultsSchema(md)
	out, err := trace.Create(s.out, c.App.Writer, rschema)
	if err != nil {
		return cliutil.Usage("%v", err)
	}
	rw := trace.NewResultWriter(out, rschema)
	s.opts.Results = rw
	var cw *trace.ChunkWriter
	if s.chunks != "" {
		cs := trace.ChunksSchema(trace.NewMeta().With(stage))
		csink, err := trace.Create(s.chunks, nil, cs)
		if err != nil {
			rw.Abort()
			return cliutil.Usage("--chunks: %v", err)
		}
		cw = trace.NewChunkWriter(csink, cs)
		s.opts.Chunks = cw
	}
	sess.SetSinks(s.opts.Results, s.opts.Chunks)
	// Progress: rows done of the total, and an ETA from the schedule
	// while it lasts; a line every few seconds off a terminal.
	prog := cliutil.NewProgress(stderr, "blis-load", "rows", st.Rows, !s.quiet, s.quiet)
	prog.Schedule(scheduleEnd(&s.opts, &st))
	detail := func(p load.Progress) string {
		rate := 0.0
		if p.Elapsed > 0 {
			rate = float64(p.Sent) / p.Elapsed.Seconds()
		}
		return fmt.Sprintf("sent %d of %d requests (%.1f/s), in flight %d, errors %d", p.Sent, st.LLM, rate, p.InFlight, p.Errors)
	}
	if prog != nil {
		sess.SetProgress(func(p load.Progress) { prog.Update(p.Done, detail(p)) })
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
	sum, runErr := sess.Run(context.Background())
	if runErr == nil {
		prog.Detail(detail(load.Progress{Elapsed: time.Duration(sum.LastSent) * time.Microsecond, Sent: sum.Sent,
			Errors: sum.Failed + sum.Rejected + sum.TimedOut}))
		prog.Finish(sum.Rows)
	}
	if runErr != nil {
		rw.Abort()
		if cw != nil {
			cw.Abort()
		}
		what := "no results were written"
		if s.out == "-" || s.out == "" {
			what = "the results stream on stdout is incomplete (no end-of-stream marker)"
		}
		return fmt.Errorf("%w; %s", runErr, what)
	}
	closeErr := rw.Close()
	if cw != nil {
		if err := cw.Close(); closeErr == nil {
			closeErr = err
		}
	}
	if closeErr != nil {
		return closeErr
	}
	if !s.quiet {
		printSummary(stderr, &sum, &st, &s.opts)
	}
	return nil
}

// scheduleEnd is when the schedule's last root is due (0 when nothing
// says: offline, a closed loop).
func scheduleEnd(o *load.Options, st *load.Stats) time.Duration {
	switch o.Timing {
	case load.TimingTrace:
		if st.LastArrival > 0 {
			return time.Duration(float64(st.LastArrival)/o.Speedup) * time.Microsecond
		}
	case load.TimingPoisson:
		return time.Duration(float64(st.Roots) / o.Rate * float64(time.Second))
	}
	return 0
}

func describeRows(st *load.Stats) string {
	s := fmt.Sprintf("%d rows: %d llm requests to send", st.Rows, st.LLM)
	if st.Tool > 0 {
		s += fmt.Sprintf(", %d tool steps", st.Tool)
	}
	if st.SourceFailed > 0 {
		s += fmt.Sprintf(", %d failed in their source (not sent)", st.SourceFailed)
	}
	return s
}

func schedule(o *load.Options) string {
	var s string
	switch o.Timing {
	case load.TimingTrace:
		s = "the table's arrival times"
		if o.Speedup != 1 {
			s += fmt.Sprintf(" ÷ %g", o.Speedup)
		}
	case load.TimingPoisson:
		s = fmt.Sprintf("Poisson arrivals at %g/s", o.Rate)
	case load.TimingOffline:
		if o.Concurrency > 0 {
			return fmt.Sprintf("closed loop of %d", o.Concurrency)
		}
		s = "offline (everything at once)"
	}
	if o.Concurrency > 0 {
		s += fmt.Sprintf(", at most %d in flight", o.Concurrency)
	}
	return s
}

// setMeta describes the session in the results' schema metadata.
func setMeta(md trace.Meta, s *settings, pr *load.ProbeResult, start time.Time) {
	md.Delete(trace.MetaSorted) // results come in the order requests end
	md.Delete(trace.MetaPrefixUnique)
	md.Set(trace.MetaStartTime, start.Format("2006-01-02T15:04:05.000Z07:00"))
	switch {
	case s.opts.Timing != load.TimingTrace:
		md.Delete(trace.MetaTimeScale)
	case s.opts.Speedup != 1:
		scale := s.opts.Speedup
		if v, err := strconv.ParseFloat(md.Get(trace.MetaTimeScale), 64); err == nil && v > 0 {
			scale *= v
		}
		md.Set(trace.MetaTimeScale, strconv.FormatFloat(scale, 'g', -1, 64))
	}
	md.Set(trace.MetaPrefixBlockSize, strconv.Itoa(s.opts.Prompts.BlockSize))
	md.Set("blis.load.url", redactURL(s.target.URL))
	md.Set("blis.load.api", string(s.target.API))
	md.Set("blis.load.model", s.target.Model)
	md.Set("blis.load.schedule", schedule(&s.opts))
	var ext []string
	if pr.Ext.IgnoreEOS {
		ext = append(ext, "min_tokens", "ignore_eos")
	}
	if pr.Ext.Usage {
		ext = append(ext, "include_usage")
	}
	md.Set("blis.load.extensions", strings.Join(ext, ","))
	prompts := "token-ids"
	if s.target.API == load.Chat {
		prompts = "words"
	}
	md.Set("blis.load.prompts", prompts)
}

// redactURL hides credentials in a URL (http://user:pass@host).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = url.User("***")
	return u.String()
}

// redactArgs keeps credentials written into --url out of provenance.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
			out[i] = k + "=" + redactURL(v)
			continue
		}
		out[i] = redactURL(a)
	}
	return out
}

func sigName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

func printSummary(w io.Writer, sum *load.Summary, st *load.Stats, o *load.Options) {
	el := sum.Elapsed.Seconds()
	fmt.Fprintf(w, "blis-load: %d rows: %d completed, %d failed, %d rejected, %d timed out, %d dropped, %d unfinished, %d source_failed\n",
		sum.Rows, sum.Completed, sum.Failed, sum.Rejected, sum.TimedOut, sum.Dropped, sum.Unfinished, sum.SourceFailed)
	if sum.Stopped != "" {
		fmt.Fprintf(w, "blis-load: %s", sum.Stopped)
		if left := st.Rows - sum.Rows; left > 0 {
			fmt.Fprintf(w, "; %d rows of the table were not reached (not in the results)", left)
		}
		fmt.Fprintln(w)
	}
	if el > 0 {
		// The send rate over the sending (start to the last request
		// sent), not over the drain that follows it.
		sent := ""
		if sum.Sent > 0 && sum.LastSent > 0 {
			sending := float64(sum.LastSent) / 1e6
			sent = fmt.Sprintf(" in %.1f s (%.1f/s)", sending, float64(sum.Sent)/sending)
		}
		fmt.Fprintf(w, "blis-load: %d requests sent%s; %.1f s in all, to the last response: %d output tokens (%.0f/s); at most %d rows held in memory\n",
			sum.Sent, sent, el, sum.Tokens, float64(sum.Tokens)/el, sum.PeakHeld)
	}
	if sum.Sent > 0 {
		l := sum.IssueLag
		what := "sent − due (how late requests went)"
		if o.Timing == load.TimingOffline {
			what = "sent − armed (offline: nothing has a due time)"
		}
		fmt.Fprintf(w, "blis-load: %s: p50 %d µs, p99 %d µs, max %d µs", what, l.ValueAtQuantile(50), l.ValueAtQuantile(99), l.Max())
		if sw := sum.SlotWait; sw.Max() > 0 && o.Concurrency > 0 {
			fmt.Fprintf(w, "; of which waiting for a --concurrency slot: mean %.1f ms, max %.1f ms", sw.Mean()/1e3, float64(sw.Max())/1e3)
		}
		fmt.Fprintln(w)
	}
	if sum.OutputDiffers > 0 {
		fmt.Fprintf(w, "blis-load: %d completed requests generated another number of tokens than output_tokens asked (the server ignores min_tokens/ignore_eos?): output_tokens holds what they generated\n", sum.OutputDiffers)
	}
	if sum.InputDiffers > 0 {
		fmt.Fprintf(w, "blis-load: %d completed requests had a prompt of another length than input_tokens by the server's count: input_tokens holds the server's count\n", sum.InputDiffers)
	}
	if len(sum.Reasons) > 0 {
		fmt.Fprintf(w, "blis-load: failed, rejected, timed out and dropped, by kind (the drop_reason column has each message):\n")
		trace.WriteReasons(w, "  ", sum.Reasons, maxReasons)
	}
}

// maxReasons bounds the kinds of failure listed (the rest are counted on
// one line).
const maxReasons = 12

func sameFile(a, b string) bool {
	if fa, err := os.Stat(a); err == nil {
		if fb, err := os.Stat(b); err == nil {
			return os.SameFile(fa, fb)
		}
	}
	return a == b
}
