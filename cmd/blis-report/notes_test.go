package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/internal/cliutil"
)

// TestNotesOnStderr: a note (here an --slo class no row has) goes to stderr
// as well as into the report, so that a script saving the report sees it.
func TestNotesOnStderr(t *testing.T) {
	small := filepath.Join("..", "..", "lib", "report", "testdata", "small.results.arrows")
	out := filepath.Join(t.TempDir(), "r.json")
	var stderr bytes.Buffer
	code := cliutil.RunArgs(app(), []string{"blis-report", "--format", "json", "--slo", "nosuch:ttft=1s", "-o", out, small}, &stderr)
	want := "no row has slo_class nosuch"
	if code != 0 || !strings.Contains(stderr.String(), "blis-report: note: "+small+": --slo nosuch:...: "+want) {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(b, []byte(want)) {
		t.Fatalf("the JSON notes lack the note: %v\n%.400s", err, b)
	}
}
