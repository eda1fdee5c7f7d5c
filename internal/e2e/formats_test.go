package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLargeResultsEveryFormat: a results table of many batches, saved by
// blis-sim as an IPC stream, an IPC file and Parquet, gzipped, and converted
// between formats by blis-convert, gives the same report in every form,
// read by path and on stdin. blis-report panicked on IPC files of more than
// one batch (issue 10, item 1). The suite runs 100,000 rows (3 batches and
// more); bench/formats.sh runs it at 1,000,000 (BLIS_FORMATS_ROWS).
func TestLargeResultsEveryFormat(t *testing.T) {
	bin := binaries(t)
	start := time.Now()
	defer func() { t.Logf("%s without the build", time.Since(start).Round(time.Millisecond)) }()
	rows := 100_000
	if v := os.Getenv("BLIS_FORMATS_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BLIS_FORMATS_ROWS=%q: expected a row count", v)
		}
		rows = n
	}
	dir := t.TempDir()
	run := func(stdin, stdout, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		if stdin != "" {
			f, err := os.Open(filepath.Join(dir, stdin))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cmd.Stdin = f
		}
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
		if stdout != "" {
			if err := os.WriteFile(filepath.Join(dir, stdout), out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("", "", "gen", "-n", strconv.Itoa(rows), "-o", "requests.arrows")
	// Eight replicas keep up with the generator's 96 req/s: the run is short.
	sim := []string{"-q", "--replicas", "8", "--latency", "roofline"}
	run("requests.arrows", "results.arrows", "blis-sim", sim...)
	run("", "", "blis-sim", append(sim, "-o", "results.arrow", "requests.arrows")...)
	run("", "", "blis-sim", append(sim, "-o", "results.parquet", "requests.arrows")...)
	run("", "", "blis-convert", "results.parquet", "-o", "converted.arrow")
	run("", "", "blis-convert", "results.arrow", "-o", "converted.parquet")
	run("", "", "blis-convert", "results.arrow", "-o", "converted.arrows")
	for _, f := range []string{"results.arrows", "results.arrow", "results.parquet"} {
		gzipTo(t, filepath.Join(dir, f), filepath.Join(dir, f+".gz"))
	}
	files := []string{"results.arrows", "results.arrow", "results.parquet", "results.arrows.gz", "results.arrow.gz",
		"results.parquet.gz", "converted.arrow", "converted.parquet", "converted.arrows"}

	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var want, wantStdin string
	for _, f := range files {
		run("", f+".txt", "blis-report", f)
		run(f, f+".stdin.txt", "blis-report")
		run("", "", "blis-convert", "--count", f)
		got := strings.Replace(read(f+".txt"), "input "+f+":", "input X:", 1)
		if want == "" {
			want, wantStdin = got, read(f+".stdin.txt")
			if !strings.Contains(want, "input X: "+strconv.Itoa(rows)+" rows") {
				t.Fatalf("report of %s does not count %d rows:\n%.300s", f, rows, want)
			}
			continue
		}
		if got != want {
			t.Errorf("report of %s differs from that of %s:\n%s", f, files[0], firstDiff(got, want))
		}
		if s := read(f + ".stdin.txt"); s != wantStdin {
			t.Errorf("report of %s on stdin differs from that of %s:\n%s", f, files[0], firstDiff(s, wantStdin))
		}
	}
}

func gzipTo(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	if _, err := io.Copy(zw, in); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return "line " + strconv.Itoa(i+1) + ":\n  " + al[i] + "\n  " + bl[i]
		}
	}
	return "lengths differ"
}
