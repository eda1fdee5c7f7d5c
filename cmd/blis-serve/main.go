// Command blis-serve runs the simulator behind an OpenAI-compatible HTTP
// endpoint, in real time (lib/serve; docs/load.md#blis-serve).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/internal/clusterflags"
	"github.com/blis-sim/blis/lib/serve"
	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

func main() { cliutil.Run(app()) }

func app() *cli.App {
	return &cli.App{
		Name:      "blis-serve",
		Usage:     "serve a simulated cluster as an OpenAI-compatible endpoint, in real time",
		UsageText: "blis-serve [--cluster cluster.yaml] [flags] --listen 127.0.0.1:8000 [-o results.arrow]",
		Description: "Serves POST /v1/completions, POST /v1/chat/completions (streamed or not), GET /v1/models and GET /health.\n" +
			"Each request is simulated when it arrives; its tokens are sent when the simulation produces them.\n" +
			"SIGINT or SIGTERM stops taking requests, lets those in flight finish for --drain, and writes -o.\n" +
			"See docs/load.md (blis-serve).",
		HideHelpCommand: true,
		Metadata:        map[string]any{cliutil.OwnSignals: true}, // an interrupt drains the requests in flight
		Flags: append(clusterflags.Flags(), clusterflags.PolicyFlag(),
			&cli.StringFlag{Name: "listen", Aliases: []string{"l"}, Value: "127.0.0.1:8000", Usage: "address to serve on (`HOST:PORT`)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the results table of every request served to `FILE` on exit (.arrow, .parquet or a stream)"},
			&cli.Float64Flag{Name: "speedup", Value: 1, Usage: "run simulated time X times faster than the wall clock (X > 1: a test of a router, say, in less time)"},
			&cli.IntFlag{Name: "block-size", Value: 16, Usage: "tokens per derived prefix hash (blis-load's --block-size, or the table's blis.prefix_block_size)"},
			&cli.Int64Flag{Name: "default-max-tokens", Value: 256, Usage: "output tokens of a request without max_tokens"},
			&cli.DurationFlag{Name: "drain", Value: 30 * time.Second, Usage: "after SIGINT/SIGTERM, how long requests in flight may finish (the rest are written unfinished)"},
			&cli.BoolFlag{Name: "check-invariants", Usage: "assert the simulator's invariants while serving"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no messages on stderr"},
		),
		Action: run,
	}
}

func run(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usage("blis-serve takes no arguments (found %q): requests come over HTTP", c.Args().First())
	}
	if x := c.Float64("speedup"); !(x > 0) || x > 1e6 {
		return cliutil.Usage("--speedup: expected a number > 0 and <= 1e6, found %v", x)
	}
	if n := c.Int("block-size"); n < 1 {
		return cliutil.Usage("--block-size: expected a positive integer, found %d", n)
	}
	if n := c.Int64("default-max-tokens"); n < 1 || n > 1<<30 {
		return cliutil.Usage("--default-max-tokens: expected 1 to 2^30, found %d", n)
	}
	setup, err := clusterflags.Setup(c)
	if err != nil {
		return err
	}
	stderr := c.App.ErrWriter
	quiet := c.Bool("quiet")

	// The results table is created before serving, so a bad path fails now.
	var rw *trace.ResultWriter
	var out trace.Sink
	if p := c.String("output"); p != "" {
		stage := trace.Stage{Tool: "blis-serve", Version: trace.Version, Args: os.Args[1:], Seed: &setup.Cfg.Seed}
		md := trace.NewMeta().With(stage)
		md.Set(trace.MetaPrefixBlockSize, strconv.Itoa(c.Int("block-size")))
		setup.Annotate(md)
		schema := trace.ResultsSchema(md)
		if out, err = trace.Create(p, c.App.Writer, schema); err != nil {
			return cliutil.Usage("-o: %v", err)
		}
		rw = trace.NewResultWriter(out, schema)
	}
	scfg := serve.Config{Setup: setup, Speedup: c.Float64("speedup"), BlockSize: c.Int("block-size"),
		DefaultMaxTokens: c.Int64("default-max-tokens"), CheckInvariants: c.Bool("check-invariants")}
	if rw != nil {
		scfg.Results = rw
	}
	srv, err := serve.New(scfg)
	if err != nil {
		if rw != nil {
			rw.Abort()
			trace.Abort(out)
		}
		return cliutil.BadInput(err)
	}
	ln, err := net.Listen("tcp", c.String("listen"))
	if err != nil {
		if rw != nil {
			rw.Abort()
			trace.Abort(out)
		}
		return cliutil.Usage("--listen: %v", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second}
	srv.Start()
	if !quiet {
		// The latency model and why, once serving: a busy port is one line.
		for _, w := range setup.Why {
			fmt.Fprintln(stderr, w)
		}
		if setup.Bundle != nil {
			fmt.Fprintf(stderr, "blis-serve: %s\n", setup.Bundle.Describe())
		}
		fmt.Fprintf(stderr, "blis-serve: serving %s on http://%s/v1 (speedup %g)\n", strings.Join(srv.Models(), ", "), ln.Addr(), c.Float64("speedup"))
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var serveErr error
	select {
	case s := <-sig:
		if !quiet {
			fmt.Fprintf(stderr, "blis-serve: %s: no more requests; waiting up to %s for those in flight (again to stop now)\n", sigName(s), c.Duration("drain"))
		}
	case serveErr = <-served:
	case <-srv.Done(): // the simulation failed: Close returns why
	}
	drain := c.Duration("drain")
	closed := make(chan struct{})
	var oc serve.Outcome
	var runErr error
	go func() {
		oc, runErr = srv.Close(drain)
		close(closed)
	}()
	select {
	case <-closed:
	case <-sig:
		// A second signal: end the rest now.
		srv.Abort()
		<-closed
	}
	// The handlers have their answers; give them a moment to write them.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	hs.Shutdown(ctx)
	cancel()
	if rw != nil {
		if runErr != nil {
			rw.Abort()
			trace.Abort(out)
		} else if err := rw.Close(); err != nil {
			trace.Abort(out)
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	if !quiet {
		s := oc.Summary
		fmt.Fprintf(stderr, "blis-serve: %d requests: %d completed, %d rejected, %d dropped, %d timed out or disconnected, %d unfinished; of %d in flight at the stop, %d finished and %d were cut (written unfinished)\n",
			s.Injected, s.Completed, s.Rejected, s.Dropped, s.TimedOut, s.Unfinished, oc.Drained+oc.Unfinished, oc.Drained, oc.Unfinished)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

func sigName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}
