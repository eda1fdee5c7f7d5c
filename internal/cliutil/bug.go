package cliutil

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/blis-sim/blis/lib/bug"
	"github.com/blis-sim/blis/lib/cleanup"
	"github.com/blis-sim/blis/lib/trace"
	"github.com/urfave/cli/v2"
)

// ReportURL is where bugs are reported.
const ReportURL = "https://github.com/blis-sim/blis/issues"

// reportBug handles a panic: temporaries are removed and one line says that
// this is a bug in blis (exit status 1, never the 2 of bad input). The stack
// goes to a file the line names, or to stderr with BLIS_DEBUG=1.
func reportBug(name string, v any, stack []byte, stderr io.Writer) int {
	cleanup.RemoveAll()
	msg := strings.Join(strings.Fields(fmt.Sprint(v)), " ")
	var where string
	if os.Getenv("BLIS_DEBUG") != "" {
		fmt.Fprintf(stderr, "panic: %s\n\n%s\n", msg, stack)
		where = "the stack above"
	} else if f, err := os.CreateTemp("", name+"-bug-*.txt"); err == nil {
		fmt.Fprintf(f, "%s %s\ncommand: %q\npanic: %s\n\n%s", name, trace.Version, os.Args, msg, stack)
		f.Close()
		where = "the stack in " + f.Name()
	} else {
		where = "the stack (rerun with BLIS_DEBUG=1 to print it)"
	}
	fmt.Fprintf(stderr, "%s: internal error: %s: this is a bug in blis, not a problem with your input; please report it at %s with the command line and %s\n",
		name, msg, ReportURL, where)
	return ExitOther
}

// testPanic is a hidden hook for the tests of the real binaries:
// BLIS_TEST_PANIC=main panics in the command's action, =goroutine in a
// goroutine it starts.
func testPanic(app *cli.App) {
	mode := os.Getenv("BLIS_TEST_PANIC")
	if mode == "" || app.Action == nil {
		return
	}
	action := app.Action
	app.Action = func(c *cli.Context) error {
		switch mode {
		case "main":
			panic("test panic (BLIS_TEST_PANIC=main)")
		case "goroutine":
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer bug.Catch()
				panic("test panic in a goroutine (BLIS_TEST_PANIC=goroutine)")
			}()
			<-done
		}
		return action(c)
	}
}
