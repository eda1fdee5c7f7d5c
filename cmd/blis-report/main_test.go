package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/trace"
)

// TestExitCodes runs the real entry point: bad usage and bad input exit 2
// with a message naming the problem; a good run writes the report.
func TestExitCodes(t *testing.T) {
	small := filepath.Join("..", "..", "lib", "report", "testdata", "small.results.arrows")
	steps := filepath.Join("..", "..", "lib", "report", "testdata", "small.steps.arrows")
	out := filepath.Join(t.TempDir(), "out.md")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--format", "markdown", "-o", out, small}, 0, ""},
		{[]string{"--format", "xml", small}, 2, "--format: expected table, markdown, csv or json"},
		{[]string{"--by", "region", small}, 2, `--by "region": expected one of`},
		{[]string{"--slo", "ttft=soon", small}, 2, "positive duration"},
		{[]string{"--steps", small, small}, 2, "expected a steps table"},
		{[]string{steps}, 2, "is a steps table, expected a results table"},
		{[]string{"no-such-file.arrows"}, 2, "no-such-file.arrows"},
		{[]string{small, "--html", out + ".html"}, 2, "flag --html after the input files: flags go first"},
		// The page's pictures have no meaning without the page.
		{[]string{"--decisions", small, small}, 2, "--decisions draws in the HTML page: give --html FILE too"},
		{[]string{"--session", "s1", small}, 2, "--session draws in the HTML page"},
		{[]string{"--html", out + ".html", "--decisions", small, small}, 2, "expected a decisions table"},
		{[]string{"--html", out + ".html", "--session", "s1", "--steps", steps, small}, 0, ""},
	} {
		var stderr bytes.Buffer
		code := cliutil.RunArgs(app(), append([]string{"blis-report"}, c.args...), &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(b, []byte("## Latency (ms)")) {
		t.Errorf("markdown output missing: %v\n%s", err, b)
	}
	// --session picks the timeline's session.
	if b, err := os.ReadFile(out + ".html"); err != nil || !bytes.Contains(b, []byte("Session s1: chosen with --session")) {
		t.Errorf("--session s1: no timeline of s1 in the page (%v)", err)
	}
}

// TestParquetInput converts the fixture to Parquet and checks the report is
// the same as from the Arrow stream (the binary links lib/trace/parquetio).
func TestParquetInput(t *testing.T) {
	small := filepath.Join("..", "..", "lib", "report", "testdata", "small.results.arrows")
	pq := filepath.Join(t.TempDir(), "small.parquet")
	src, err := trace.Open(small, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := trace.Create(pq, nil, src.Schema())
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var outs []string
	for _, in := range []string{small, pq} {
		out := filepath.Join(dir, filepath.Base(in)+".json")
		var stderr bytes.Buffer
		if code := cliutil.RunArgs(app(), []string{"blis-report", "--format", "json", "-o", out, in}, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", in, code, stderr.String())
		}
		b, _ := os.ReadFile(out)
		// Paths differ; everything after the inputs list must not.
		outs = append(outs, string(b[bytes.Index(b, []byte(`"notes"`)):]))
	}
	if outs[0] != outs[1] {
		t.Errorf("parquet report differs from arrow report:\n%s\n---\n%s", outs[0], outs[1])
	}
}

// TestSLOFlagKeepsCommas: "CLASS:ttft=…,tpot=…" is one SLO of that class;
// urfave/cli must not split the flag value at its commas (which made the
// tpot target global).
func TestSLOFlagKeepsCommas(t *testing.T) {
	small := filepath.Join("..", "..", "lib", "report", "testdata", "small.results.arrows")
	out := filepath.Join(t.TempDir(), "slo.csv")
	var stderr bytes.Buffer
	args := []string{"blis-report", "--format", "csv", "-o", out, "--slo", "interactive:ttft=100ms,tpot=40ms", "--slo", "batch:e2e=1s", small}
	if code := cliutil.RunArgs(app(), args, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, _ := os.ReadFile(out)
	for _, want := range []string{
		`slo,"slo_class=interactive/ttft<=100ms,tpot<=40ms",requests,6`,
		`slo,slo_class=batch/e2e<=1s,requests,4`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("missing %q in\n%s", want, b)
		}
	}
}
