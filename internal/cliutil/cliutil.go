// Package cliutil holds what every blis binary does the same way: exit
// codes (lib/badinput marks status 2), a quiet exit on a closed pipe, error
// formatting, a panic reported as a bug in blis, SIGINT/SIGTERM removing
// temporaries (lib/cleanup), --help and --version, and the progress line.
// It is for the commands only: libraries return errors and never exit.
package cliutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/bug"
)

// Exit codes shared by all tools.
const (
	ExitOK    = 0
	ExitOther = 1
	ExitUsage = 2 // bad usage or bad input: retrying will not help
)

// Usage is a bad-usage error (exit status 2); see lib/badinput, the one
// mechanism every tool and library uses for it.
func Usage(format string, args ...any) error { return badinput.Errorf(format, args...) }

// BadInput marks err as bad input (exit status 2); nil stays nil.
func BadInput(err error) error { return badinput.Wrap(err) }

// Run runs app with os.Args and exits with the right status. It never returns.
func Run(app *cli.App) {
	os.Exit(RunArgs(app, os.Args, os.Stderr))
}

// RunArgs runs app and returns the exit status, printing errors to stderr.
// SIGPIPE is ignored so that a closed downstream pipe surfaces as EPIPE,
// which ends the tool quietly with status 0, as `| head` users expect. A
// panic, in the command or in a goroutine deferring bug.Catch, is reported
// as a bug in blis with exit status 1.
func RunArgs(app *cli.App, args []string, stderr io.Writer) (status int) {
	signal.Ignore(syscall.SIGPIPE)
	app.ErrWriter = stderr
	setup(app)
	app.ExitErrHandler = func(*cli.Context, error) {} // we map errors ourselves
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return flagError(app, err) }
	bug.SetHandler(func(v any, stack []byte) { os.Exit(reportBug(app.Name, v, stack, stderr)) })
	defer func() {
		if v := recover(); v != nil {
			status = reportBug(app.Name, v, debug.Stack(), stderr)
		}
	}()
	testPanic(app)
	defer handleSignals(app, stderr)()
	err := app.Run(args)
	return Status(app.Name, err, stderr)
}

// Status maps an error to an exit status, printing it unless it is a closed pipe.
func Status(name string, err error, stderr io.Writer) int {
	if err == nil || IsClosedPipe(err) {
		return ExitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if badinput.Is(err) {
		return ExitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return ExitOther
}

// IsClosedPipe reports whether err comes from writing to a closed pipe.
func IsClosedPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE)
}

// Input returns the positional input path of a command ("-" when absent) and
// rejects extra arguments.
func Input(c *cli.Context) (string, error) {
	switch c.NArg() {
	case 0:
		return "-", nil
	case 1:
		return c.Args().First(), nil
	}
	return "", Usage("expected one input (a file or -), got %d: %v", c.NArg(), c.Args().Slice())
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// CPUProfile writes a Go CPU profile to path until stop is called.
func CPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
