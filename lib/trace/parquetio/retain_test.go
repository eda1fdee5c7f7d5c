package parquetio_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

// writeResults writes n results rows (several batches) to path in the
// format its extension names.
func writeResults(t *testing.T, path string, n int) {
	t.Helper()
	md := trace.NewMeta().With(trace.Stage{Tool: "test", Version: trace.Version})
	s := trace.ResultsSchema(md)
	sink, err := trace.Create(path, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewResultWriter(sink, s)
	for i := 0; i < n; i++ {
		r := trace.NewRequest(fmt.Sprintf("r%d", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i), int32(i%1000+1), 7
		r.TenantID = []string{"a", "b", "c"}[i%3]
		res := trace.NewResult(r)
		res.Status = trace.StatusCompleted
		res.TTFTUS = int64(i) * 3
		if err := w.Write(&res); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func gzipFile(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(raw)
	zw.Close()
	if err := os.WriteFile(to, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBatchesSurviveNext: a batch a reader retains stays valid after the
// next call to Next, in every format and every way a table arrives (path,
// stdin, gzipped). blis-report reads ahead this way; the IPC file reader
// used to free the previous batch itself (issue 10, item 1).
func TestBatchesSurviveNext(t *testing.T) {
	const n = 3*trace.BatchRows + 17
	dir := t.TempDir()
	for _, ext := range []string{".arrows", ".arrow", ".parquet"} {
		p := filepath.Join(dir, "results"+ext)
		writeResults(t, p, n)
		gzipFile(t, p, p+".gz")
	}
	for _, c := range []struct{ name, path, stdin string }{
		{"stream", "results.arrows", ""},
		{"ipc file", "results.arrow", ""},
		{"parquet", "results.parquet", ""},
		{"gzip stream", "results.arrows.gz", ""},
		{"gzip ipc file", "results.arrow.gz", ""},
		{"gzip parquet", "results.parquet.gz", ""},
		{"stream on stdin", "-", "results.arrows"},
		{"ipc file on stdin", "-", "results.arrow"},
		{"parquet on stdin", "-", "results.parquet"},
		{"gzip parquet on stdin", "-", "results.parquet.gz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if path != "-" {
				path = filepath.Join(dir, path)
			}
			var stdin io.Reader
			if c.stdin != "" {
				f, err := os.Open(filepath.Join(dir, c.stdin))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				stdin = f
			}
			src, err := trace.Open(path, stdin)
			if err != nil {
				t.Fatal(err)
			}
			if src.Meta().Table() != trace.TableResults {
				t.Fatalf("blis.table = %q", src.Meta().Table())
			}
			var held []arrow.RecordBatch
			defer func() {
				for _, b := range held {
					b.Release()
				}
			}()
			for {
				rec, err := src.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				rec.Retain()
				held = append(held, rec)
			}
			if err := src.Close(); err != nil {
				t.Fatal(err)
			}
			if len(held) < 4 {
				t.Fatalf("%d batches: the test needs several", len(held))
			}
			// Every batch, read after all the others and after Close.
			row := 0
			for _, b := range held {
				ids := b.Column(b.Schema().FieldIndices(trace.ColRequestID)[0]).(*array.String)
				ttft := b.Column(b.Schema().FieldIndices(trace.ColTTFTUS)[0]).(*array.Int64)
				for i := 0; i < int(b.NumRows()); i++ {
					if want := fmt.Sprintf("r%d", row); ids.Value(i) != want || ttft.Value(i) != int64(row)*3 {
						t.Fatalf("row %d: %s ttft %d, want %s ttft %d", row, ids.Value(i), ttft.Value(i), want, row*3)
					}
					row++
				}
			}
			if row != n {
				t.Fatalf("%d rows, want %d", row, n)
			}
		})
	}
}
