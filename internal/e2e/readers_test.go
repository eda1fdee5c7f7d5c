package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/blis-sim/blis/lib/load/fakellm"
	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

// jsReaders is the directory .ci/run installs apache-arrow and
// @duckdb/node-api into (under $BLIS_CACHE, else the user's cache/blis).
const jsReaders = "js-readers-arrow-21.2.0-duckdb-1.5.6-r.1"

// jsReadersPath finds the node_modules holding both readers: $BLIS_JS_READERS,
// else where .ci/run installs them. In CI (BLIS_CI=1) missing readers fail.
func jsReadersPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BLIS_JS_READERS")
	if p == "" {
		cache := os.Getenv("BLIS_CACHE")
		if cache == "" {
			if c, err := os.UserCacheDir(); err == nil {
				cache = filepath.Join(c, "blis")
			}
		}
		p = filepath.Join(cache, jsReaders, "node_modules")
	}
	_, errA := os.Stat(filepath.Join(p, "apache-arrow", "package.json"))
	_, errD := os.Stat(filepath.Join(p, "@duckdb", "node-api", "package.json"))
	_, errN := exec.LookPath("node")
	if err := errors(errA, errD, errN); err != nil {
		msg := fmt.Sprintf("apache-arrow and @duckdb/node-api are not installed in %s, or node is missing (%v): .ci/run installs them", p, err)
		if os.Getenv("BLIS_CI") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

func errors(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// view is what a reader saw of a table.
type view struct {
	Reader  string            `json:"reader"`
	Rows    int64             `json:"rows"`
	Columns []string          `json:"columns"`
	Meta    map[string]string `json:"meta"`
	First   *string           `json:"first"`
	Sum     string            `json:"sum"`
}

// TestIndependentReaders writes every kind of table the toolkit makes
// (requests, results, steps, blis-load's results and chunks), as Parquet and
// as Arrow IPC file and stream, with the tool that makes it, and opens each
// in DuckDB (Parquet) or Arrow JS (IPC): the row count, column names, a
// value, a column sum and the blis.* metadata must be what our reader sees.
func TestIndependentReaders(t *testing.T) {
	bin := binaries(t)
	modules := jsReadersPath(t)
	dir := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
	}
	run("blis-synth", "--example", "chat-multiturn", "-o", "requests.parquet")
	run("blis-synth", "--example", "chat-multiturn", "-o", "requests.arrow")
	run("blis-sim", "-q", "--replicas", "2", "-o", "results.parquet", "--steps", "steps.parquet", "requests.parquet")
	run("blis-sim", "-q", "--replicas", "2", "-o", "results.arrow", "--steps", "steps.arrows", "requests.arrow")
	run("blis-convert", "results.arrow", "-o", "results-converted.parquet")
	run("blis-convert", "steps.arrows", "-o", "steps-converted.parquet")
	run("blis-convert", "results.parquet", "-o", "results-converted.arrows")

	srv := fakellm.New(fakellm.Config{TTFT: time.Millisecond})
	defer srv.Close()
	run("blis-convert", "--limit", "20", "requests.arrow", "-o", "load-requests.arrow")
	run("blis-load", "-q", "--url", srv.URL0(), "--offline", "-o", "load.parquet", "--chunks", "chunks.parquet", "load-requests.arrow")
	run("blis-convert", "chunks.parquet", "-o", "chunks.arrow")

	tables := []struct{ path, kind, sum string }{
		{"requests.parquet", trace.TableRequests, trace.ColInputTokens},
		{"requests.arrow", trace.TableRequests, trace.ColInputTokens},
		{"results.parquet", trace.TableResults, trace.ColGeneratedTokens},
		{"results.arrow", trace.TableResults, trace.ColGeneratedTokens},
		{"results-converted.parquet", trace.TableResults, trace.ColE2EUS},
		{"results-converted.arrows", trace.TableResults, trace.ColTTFTUS},
		{"steps.parquet", trace.TableSteps, trace.ColBatchSize},
		{"steps.arrows", trace.TableSteps, trace.ColDurationUS},
		{"steps-converted.parquet", trace.TableSteps, trace.ColPrefillTokens},
		{"load.parquet", trace.TableResults, trace.ColGeneratedTokens},
		{"chunks.parquet", trace.TableChunks, trace.ColChunk},
		{"chunks.arrow", trace.TableChunks, trace.ColTimeUS},
	}
	args := []string{filepath.Join(repoRoot(), "internal", "e2e", "testdata", "readers", "read.cjs")}
	for _, tb := range tables {
		args = append(args, tb.path, tb.sum)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node read.cjs: %v\n%s", err, stderr.String())
	}
	var theirs map[string]view
	if err := json.Unmarshal(stdout.Bytes(), &theirs); err != nil {
		t.Fatalf("reader output: %v\n%s", err, stdout.String())
	}
	for _, tb := range tables {
		t.Run(tb.path, func(t *testing.T) {
			ours := readOurs(t, filepath.Join(dir, tb.path), tb.sum)
			got := theirs[tb.path]
			if want := "arrow-js"; strings.HasSuffix(tb.path, ".parquet") {
				want = "duckdb"
				if got.Reader != want {
					t.Fatalf("read by %q, want %q", got.Reader, want)
				}
			} else if got.Reader != want {
				t.Fatalf("read by %q, want %q", got.Reader, want)
			}
			if ours.Rows == 0 {
				t.Fatalf("%s is empty: the test proves nothing", tb.path)
			}
			if got.Rows != ours.Rows {
				t.Errorf("%s saw %d rows, we see %d", got.Reader, got.Rows, ours.Rows)
			}
			if !reflect.DeepEqual(got.Columns, ours.Columns) {
				t.Errorf("%s saw columns %v, we see %v", got.Reader, got.Columns, ours.Columns)
			}
			if got.First == nil || *got.First != *ours.First {
				t.Errorf("%s saw %v first, we see %q", got.Reader, got.First, *ours.First)
			}
			if got.Sum != ours.Sum || ours.Sum == "0" {
				t.Errorf("%s sums %s to %s, we to %s", got.Reader, tb.sum, got.Sum, ours.Sum)
			}
			if got.Meta[trace.MetaTable] != tb.kind {
				t.Errorf("%s saw %s=%q, want %q", got.Reader, trace.MetaTable, got.Meta[trace.MetaTable], tb.kind)
			}
			for k, v := range ours.Meta {
				if got.Meta[k] != v {
					t.Errorf("%s saw metadata %s=%q, we see %q", got.Reader, k, got.Meta[k], v)
				}
			}
			var prov []trace.Stage
			if err := json.Unmarshal([]byte(got.Meta[trace.MetaProvenance]), &prov); err != nil || len(prov) == 0 {
				t.Errorf("%s saw no provenance (%v): %q", got.Reader, err, got.Meta[trace.MetaProvenance])
			}
		})
	}
}

// readOurs reads a table with lib/trace.
func readOurs(t *testing.T, path, sumCol string) view {
	t.Helper()
	src, err := trace.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	v := view{Reader: "lib/trace", Meta: map[string]string{}}
	md := src.Schema().Metadata()
	for i, k := range md.Keys() {
		v.Meta[k] = md.Values()[i]
	}
	for _, f := range src.Schema().Fields() {
		v.Columns = append(v.Columns, f.Name)
	}
	si := src.Schema().FieldIndices(sumCol)
	if len(si) != 1 {
		t.Fatalf("%s: no column %s", path, sumCol)
	}
	var sum int64
	for {
		rec, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if v.First == nil && rec.NumRows() > 0 {
			s := valueString(rec.Column(0), 0)
			v.First = &s
		}
		v.Rows += rec.NumRows()
		sum += sumInts(t, rec.Column(si[0]))
	}
	v.Sum = fmt.Sprint(sum)
	return v
}

func valueString(a arrow.Array, i int) string {
	if d, ok := a.(*array.Dictionary); ok {
		return d.Dictionary().ValueStr(d.GetValueIndex(i))
	}
	return a.ValueStr(i)
}

func sumInts(t *testing.T, a arrow.Array) int64 {
	var s int64
	switch x := a.(type) {
	case *array.Int32:
		for i := 0; i < x.Len(); i++ {
			if x.IsValid(i) {
				s += int64(x.Value(i))
			}
		}
	case *array.Int64:
		for i := 0; i < x.Len(); i++ {
			if x.IsValid(i) {
				s += x.Value(i)
			}
		}
	default:
		t.Fatalf("cannot sum a %s column", a.DataType())
	}
	return s
}
