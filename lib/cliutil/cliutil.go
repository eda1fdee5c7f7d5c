// Package cliutil holds what every blis binary does the same way: exit codes,
// quiet exit on a closed pipe, and error formatting.
package cliutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Exit codes shared by all tools.
const (
	ExitOK    = 0
	ExitOther = 1
	ExitUsage = 2 // bad usage or bad input: retrying will not help
)

// UsageError marks an error caused by the user's flags or input data; it
// exits with status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage wraps err (or a formatted message) as a UsageError.
func Usage(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// BadInput wraps an existing error as a UsageError (nil stays nil).
func BadInput(err error) error {
	if err == nil {
		return nil
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return err
	}
	return &UsageError{Err: err}
}

// Run runs app with os.Args and exits with the right status. It never returns.
func Run(app *cli.App) {
	os.Exit(RunArgs(app, os.Args, os.Stderr))
}

// RunArgs runs app and returns the exit status, printing errors to stderr.
// SIGPIPE is ignored so that a closed downstream pipe surfaces as EPIPE,
// which ends the tool quietly with status 0, as `| head` users expect.
func RunArgs(app *cli.App, args []string, stderr io.Writer) int {
	signal.Ignore(syscall.SIGPIPE)
	app.ErrWriter = stderr
	app.ExitErrHandler = func(*cli.Context, error) {} // we map errors ourselves
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return &UsageError{Err: err} }
	err := app.Run(args)
	return Status(app.Name, err, stderr)
}

// Status maps an error to an exit status, printing it unless it is a closed pipe.
func Status(name string, err error, stderr io.Writer) int {
	if err == nil || IsClosedPipe(err) {
		return ExitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	// Errors of other packages that know they describe bad input
	// (lib/trace's InputError and RowError) carry a BadInput method.
	var bi interface{ BadInput() bool }
	if errors.As(err, &bi) && bi.BadInput() {
		return ExitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	if isFlagError(err) {
		return ExitUsage
	}
	return ExitOther
}

// IsClosedPipe reports whether err comes from writing to a closed pipe.
func IsClosedPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE)
}

func isFlagError(err error) bool {
	s := err.Error()
	for _, p := range []string{"flag provided but not defined", "invalid value", "Required flag", "flag needs an argument"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
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
