package cliutil

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func panicking() *cli.App {
	return &cli.App{Name: "tool", Action: func(*cli.Context) error {
		var m map[string]int
		m["x"] = 1 // a nil-map write: a real runtime panic
		return nil
	}}
}

func TestPanicIsABugWithExitStatus1(t *testing.T) {
	t.Setenv("BLIS_DEBUG", "")
	t.Setenv("TMPDIR", t.TempDir())
	var stderr bytes.Buffer
	if got := RunArgs(panicking(), []string{"tool"}, &stderr); got != ExitOther {
		t.Fatalf("status %d, want %d; stderr %q", got, ExitOther, stderr.String())
	}
	out := stderr.String()
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want one line, got %q", out)
	}
	m := regexp.MustCompile(`^tool: internal error: assignment to entry in nil map: this is a bug in blis, not a problem with your input; please report it at https://\S+ with the command line and the stack in (\S+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("unexpected line %q", out)
	}
	stack, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stack), "bug_test.go:16") {
		t.Fatalf("the file does not hold the stack of the panic:\n%s", stack)
	}
}

func TestPanicStackOnStderrWithBLISDEBUG(t *testing.T) {
	t.Setenv("BLIS_DEBUG", "1")
	var stderr bytes.Buffer
	if got := RunArgs(panicking(), []string{"tool"}, &stderr); got != ExitOther {
		t.Fatalf("status %d, want %d", got, ExitOther)
	}
	out := stderr.String()
	if !strings.Contains(out, "bug_test.go:16") || !strings.HasSuffix(out, "with the command line and the stack above\n") {
		t.Fatalf("want the stack then the line, got %q", out)
	}
}
