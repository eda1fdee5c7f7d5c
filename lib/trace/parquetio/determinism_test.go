package parquetio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// The same rows give the same bytes. With dictionary encoding, a column
// whose dictionary outgrows its page limit falls back to PLAIN midway, and
// arrow-go writes that column's per-encoding page counts from a Go map, in
// random order; 200,000 distinct arrivals and lengths make such columns.
func TestParquetBytesDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200,000 rows three times")
	}
	dir := t.TempDir()
	var files [][]byte
	for k := 0; k < 3; k++ {
		path := filepath.Join(dir, "req.parquet")
		schema := trace.RequestsSchema(trace.NewMeta())
		sink, err := trace.Create(path, nil, schema)
		if err != nil {
			t.Fatal(err)
		}
		w := trace.NewRequestWriter(sink, schema)
		for i := 0; i < 200_000; i++ {
			r := trace.NewRequest("r" + string(rune('a'+i%26)))
			r.ArrivalUS = int64(i) * 7919
			r.InputTokens, r.OutputTokens = int32(i%100_003+1), int32(i%65_537+1)
			r.RecordedTTFTUS, r.RecordedE2EUS = int64(i)*31, int64(i)*977
			if err := w.Write(&r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	for k := 1; k < len(files); k++ {
		if !bytes.Equal(files[0], files[k]) {
			t.Fatalf("write %d differs from the first (%d and %d bytes)", k+1, len(files[k]), len(files[0]))
		}
	}
}
