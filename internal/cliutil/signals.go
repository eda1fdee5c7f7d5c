package cliutil

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/blis-sim/blis/lib/cleanup"
	"github.com/urfave/cli/v2"
)

// OwnSignals is the app.Metadata key of a tool that handles SIGINT and
// SIGTERM itself (blis-load drains the requests in flight).
const OwnSignals = "blis.own-signals"

// handleSignals ends the tool on SIGINT or SIGTERM: the temporary files
// of its outputs (lib/cleanup) are removed, one line says so, and it exits
// with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as
// shells and timeout(1) do. An output on stdout is left without its
// end-of-stream marker, so the next tool reports it as cut.
func handleSignals(app *cli.App, stderr io.Writer) (stop func()) {
	if own, _ := app.Metadata[OwnSignals].(bool); own {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			n := cleanup.RemoveAll()
			sig := s.(syscall.Signal)
			what := "no partial output left behind"
			if n > 0 {
				what = fmt.Sprintf("removed %d partial output file(s)", n)
			}
			fmt.Fprintf(stderr, "%s%s: %s: stopped; %s\n", eraseLine(stderr), app.Name, sigDesc(sig), what)
			os.Exit(128 + int(sig))
		case <-done:
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

func sigDesc(s syscall.Signal) string {
	if s == syscall.SIGINT {
		return "interrupted (SIGINT)"
	}
	return "terminated (SIGTERM)"
}

// eraseLine returns what clears a progress line on a terminal.
func eraseLine(w io.Writer) string {
	if isTerminal(w) {
		return "\r\033[K"
	}
	return ""
}
