package cliutil

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		stderr string
	}{
		{"ok", nil, 0, ""},
		{"closed pipe is quiet", fmt.Errorf("writing: %w", syscall.EPIPE), 0, ""},
		{"usage", Usage("--replicas: expected a positive integer, found %d", -1), 2, "tool: --replicas: expected a positive integer, found -1\n"},
		{"bad input", BadInput(errors.New("a.csv:3: ContextTokens: expected an integer, found \"x\"")), 2, "tool: a.csv:3: ContextTokens: expected an integer, found \"x\"\n"},
		{"other", errors.New("disk full"), 1, "tool: disk full\n"},
		{"cli exit coder", cli.Exit("custom", 3), 3, "tool: custom\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := Status("tool", tc.err, &stderr); got != tc.status || stderr.String() != tc.stderr {
				t.Fatalf("Status = %d, %q; want %d, %q", got, stderr.String(), tc.status, tc.stderr)
			}
		})
	}
}

func TestRunArgsMapsFlagErrorsToUsage(t *testing.T) {
	app := &cli.App{Name: "tool", Flags: []cli.Flag{&cli.IntFlag{Name: "n"}}, Action: func(*cli.Context) error { return nil }}
	var stderr bytes.Buffer
	app.Writer = &stderr
	if got := RunArgs(app, []string{"tool", "--n", "x"}, &stderr); got != ExitUsage {
		t.Fatalf("status %d, want %d; stderr %q", got, ExitUsage, stderr.String())
	}
	if got := RunArgs(app, []string{"tool", "--nope"}, &stderr); got != ExitUsage {
		t.Fatalf("status %d, want %d; stderr %q", got, ExitUsage, stderr.String())
	}
}

func TestBadInputKeepsNil(t *testing.T) {
	if BadInput(nil) != nil {
		t.Fatal("BadInput(nil) must be nil")
	}
}

type contentErr struct{}

func (contentErr) Error() string  { return "x.arrows: corrupt" }
func (contentErr) BadInput() bool { return true }

func TestBadInputMethodMapsToUsage(t *testing.T) {
	var stderr bytes.Buffer
	if got := Status("tool", fmt.Errorf("reading: %w", contentErr{}), &stderr); got != ExitUsage {
		t.Fatalf("status %d, want %d", got, ExitUsage)
	}
}
