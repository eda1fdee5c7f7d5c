package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var binPath string

// TestMain compiles blis-convert once into a temp dir for the process tests.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "blis-convert-test")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "blis-convert")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(t *testing.T) string { return binPath }

func TestPermute(t *testing.T) {
	got := strings.Join(permute(app().Flags, []string{"a.csv", "-o", "x.arrow", "--count", "--limit=3", "-"}), " ")
	if want := "-o x.arrow --count --limit=3 -- a.csv -"; got != want {
		t.Errorf("permute = %q, want %q", got, want)
	}
}

const azure = "../../lib/convert/testdata/azure2023_code.head2000.csv"

// TestPipeRoundTrip runs `blis-convert trace | blis-convert --count -` as two
// processes joined by a real OS pipe.
func TestPipeRoundTrip(t *testing.T) {
	bin := build(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{azure}, "2000"},
		{[]string{"../../lib/convert/testdata/weka_trace_0187.json", "../../lib/convert/testdata/weka_trace_0277.json"}, "56"},
		{[]string{"--limit", "10", azure}, "10"},
	}
	for _, c := range cases {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		prod := exec.Command(bin, c.args...)
		prod.Stdout = w
		var perr, cerr, cout bytes.Buffer
		prod.Stderr = &perr
		cons := exec.Command(bin, "--count", "-")
		cons.Stdin = r
		cons.Stdout = &cout
		cons.Stderr = &cerr
		if err := prod.Start(); err != nil {
			t.Fatal(err)
		}
		if err := cons.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		r.Close()
		if err := prod.Wait(); err != nil {
			t.Fatalf("%v: producer: %v %s", c.args, err, perr.String())
		}
		if err := cons.Wait(); err != nil {
			t.Fatalf("%v: consumer: %v %s", c.args, err, cerr.String())
		}
		if got := strings.TrimSpace(cout.String()); got != c.want {
			t.Errorf("%v: count %q, want %q", c.args, got, c.want)
		}
	}
}

// TestHeadClosesPipe: `blis-convert … | head -c 100` exits 0 with no stderr.
func TestHeadClosesPipe(t *testing.T) {
	bin := build(t)
	big := filepath.Join(t.TempDir(), "big.csv")
	src, err := os.ReadFile(azure)
	if err != nil {
		t.Fatal(err)
	}
	// Repeat the body with increasing dates so the output far exceeds pipe buffers.
	var b bytes.Buffer
	lines := strings.Split(strings.TrimSpace(string(src)), "\n")
	b.WriteString(lines[0] + "\n")
	for day := 10; day < 30; day++ {
		for _, l := range lines[1:] {
			b.WriteString("2023-11-" + itoa2(day) + l[10:] + "\n")
		}
	}
	if err := os.WriteFile(big, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	head, err := exec.LookPath("head")
	if err != nil {
		t.Skip("no head")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	conv := exec.Command(bin, big)
	conv.Stdout = w
	var stderr bytes.Buffer
	conv.Stderr = &stderr
	h := exec.Command(head, "-c", "100")
	h.Stdin = r
	var hout bytes.Buffer
	h.Stdout = &hout
	if err := conv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close()
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := conv.Wait(); err != nil || stderr.Len() != 0 {
		t.Fatalf("blis-convert | head -c 100: %v, stderr %q", err, stderr.String())
	}
	if hout.Len() != 100 {
		t.Fatalf("head read %d bytes", hout.Len())
	}
}

func itoa2(d int) string { return string([]byte{byte('0' + d/10), byte('0' + d%10)}) }

// TestExitCodes: bad input exits 2 with file:line: column: expected, found.
func TestExitCodes(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,1\n2023-11-16 18:17:04,x,1\n"), 0o644)
	cases := []struct {
		args     []string
		code     int
		stderr   string
		checkOut bool
	}{
		{[]string{bad, "-o", filepath.Join(dir, "o.arrow")}, 2, bad + ":3: ContextTokens: expected a token count (integer >= 0), found \"x\"", false},
		{[]string{"--skip-bad", "--count", bad}, 0, "skipped 1 bad row(s)", true},
		{[]string{"--format", "nope", bad}, 2, "unknown format", false},
		{[]string{"--count", "--filter-model", "gpt-5", azure}, 0, "note: no rows kept: all 2000 requests read were removed by --start/--end/--sample/--filter-model", false},
		{[]string{"--speedup", "0", bad}, 2, "--speedup: expected a positive factor, found 0", false},
		{[]string{"--speedup", "NaN", bad}, 2, "--speedup: expected a positive factor, found NaN", false},
		{[]string{"--sample", "0", bad}, 2, "--sample: expected a probability in (0, 1], found 0", false},
		{[]string{"../../lib/convert/testdata/vidur_arxiv_stats.head5.csv", "-o", filepath.Join(dir, "x.arrow")}, 2, "no arrival times", false},
		{[]string{filepath.Join(dir, "missing.csv"), "-o", filepath.Join(dir, "y.arrow")}, 2, "no such file", false},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, c.args...)
		var stderr, stdout bytes.Buffer
		cmd.Stderr, cmd.Stdout = &stderr, &stdout
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%v: exit %d stderr %q; want exit %d and %q", c.args, code, stderr.String(), c.code, c.stderr)
		}
		if c.checkOut && strings.TrimSpace(stdout.String()) != "1" {
			t.Errorf("%v: stdout %q", c.args, stdout.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("failed runs left files behind: %v", entries)
	}
}

// TestParquetRoundTrip: -o x.parquet, then --format arrow back to a stream.
func TestParquetRoundTrip(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	pq := filepath.Join(dir, "t.parquet")
	if out, err := exec.Command(bin, azure, "-o", pq).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, err := exec.Command(bin, "--count", pq).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "2000" {
		t.Fatalf("count parquet: %v %s", err, out)
	}
	st := filepath.Join(dir, "t.stream")
	if out, err := exec.Command(bin, "--format", "arrow", pq, "-o", st).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	out, err = exec.Command(bin, "--count", st).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "2000" {
		t.Fatalf("count stream: %v %s", err, out)
	}
}
