package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/trace"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := app()
	a.Writer = &stdout
	code := cliutil.RunArgs(a, append([]string{"blis-synth"}, args...), &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCLI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "react.arrow")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nhorizon: 1s\naggregate_rate: 1\nclients:\n  - {name: a, input: 10}\n"), 0o644)
	// Valid, but its unbounded lengths break the prompt limit while generating.
	huge := filepath.Join(dir, "huge.yaml")
	os.WriteFile(huge, []byte("version: 1\nhorizon: 10s\naggregate_rate: 5\nclients:\n  - {name: a, input: {dist: lognormal, mu: 1000, sigma: 1}, output: 3}\n"), 0o644)
	kept := filepath.Join(dir, "kept.arrow")
	os.WriteFile(kept, []byte("an earlier output"), 0o644)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--list-examples"}, 0, "react ", ""},
		{[]string{"--example", "react", "--print-example"}, 0, "agentic:", ""},
		{[]string{"--example", "react", "-o", out, "--seed", "3"}, 0, "", "blis-synth: 3"},
		{[]string{"--example", "nope"}, 2, "", `no built-in example "nope"`},
		{[]string{bad}, 2, "", bad + `:5: client "a": missing output (a token length distribution)`},
		{[]string{}, 2, "", "expected one spec file"},
		{[]string{bad, "-o", out}, 2, "", "flag -o after the spec file"},
		{[]string{"--example", "react", "--check"}, 0, "", "spec is valid"},
		{[]string{"--example", "closed-loop", "--num-requests", "0"}, 2, "", "--num-requests"},
		{[]string{"-o", kept, huge}, 2, "", huge + `:5: client "a": request a-0: its prompt grew to`},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%v: exit %d, stdout %.80q, stderr %q", tc.args, code, stdout, stderr)
		}
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "an earlier output" {
		t.Errorf("a failed run replaced or removed the existing output: %q, %v", b, err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 4 {
		t.Errorf("files left behind: %v", es)
	}
	src, err := trace.Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	md := src.Meta()
	if md.Get(trace.MetaSorted) != "arrival" || md.Get(trace.MetaPrefixBlockSize) != "16" || len(md.Provenance) != 1 || *md.Provenance[0].Seed != 3 {
		t.Fatalf("metadata %+v", md)
	}
	rows, err := trace.ReadAllRequests(src)
	if err != nil || len(rows) < 100 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
}

// --fit proposes a spec from a requests table: the spec on stdout parses,
// the comparison goes to stderr; bad input exits 2 naming the file.
func TestCLIFit(t *testing.T) {
	dir := t.TempDir()
	tbl := filepath.Join(dir, "chat.arrow")
	if code, _, stderr := runCLI(t, "--example", "chat-multiturn", "--num-requests", "3000", "-o", tbl); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := runCLI(t, "--fit", tbl)
	if code != 0 || !strings.Contains(stdout, "version: 1") || !strings.Contains(stdout, "context_growth: accumulate") ||
		!strings.Contains(stderr, "| input mean |") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	spec := filepath.Join(dir, "fitted.yaml")
	if code, _, stderr := runCLI(t, "-q", "-o", spec, "--fit", tbl); code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "--check", spec); code != 0 {
		t.Fatalf("fitted spec: %s", stderr)
	}
	notTable := filepath.Join(dir, "x.arrow")
	os.WriteFile(notTable, []byte("nope"), 0o644)
	if code, _, stderr := runCLI(t, "--fit", notTable); code != 2 || !strings.Contains(stderr, notTable) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "--fit", tbl, spec); code != 2 || !strings.Contains(stderr, "--fit takes the trace only") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
