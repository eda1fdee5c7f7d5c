package convert

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

// TestTableInputsByContent: an Arrow IPC file or Parquet table is read by its
// content wherever it comes from: piped on stdin (plain or gzipped), or saved
// under a name without the usual extension. Both need random access, so a
// plain stream reader cannot read them.
func TestTableInputsByContent(t *testing.T) {
	data, _, err := convertFiles(t, Options{Inputs: []string{"testdata/azure2023_code.head12.csv"}})
	if err != nil {
		t.Fatal(err)
	}
	want := rowsOf(dump(t, data))
	dir := t.TempDir()
	for _, ext := range []string{".arrow", ".parquet"} {
		p := filepath.Join(dir, "t"+ext)
		if _, err := Convert(Options{Inputs: []string{"-"}}, p, bytes.NewReader(data), nil); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		odd := filepath.Join(dir, "t"+ext+".dat")
		if err := os.WriteFile(odd, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(raw)
		zw.Close()
		for _, c := range []struct {
			name  string
			opts  Options
			stdin []byte
		}{
			{"stdin", Options{Inputs: []string{"-"}}, raw},
			{"stdin --format arrow", Options{Inputs: []string{"-"}, Format: "arrow"}, raw},
			{"gzipped stdin", Options{Inputs: []string{"-"}}, gz.Bytes()},
			{"other extension", Options{Inputs: []string{odd}}, nil},
			{"other extension --format arrow", Options{Inputs: []string{odd}, Format: "arrow"}, nil},
		} {
			n, _, err := Count(c.opts, bytes.NewReader(c.stdin))
			if err != nil || n != 12 {
				t.Errorf("%s %s: count %d, %v", ext, c.name, n, err)
			}
			var out bytes.Buffer
			if _, err := Convert(c.opts, "-", bytes.NewReader(c.stdin), &out); err != nil {
				t.Errorf("%s %s: %v", ext, c.name, err)
				continue
			}
			if got := rowsOf(dump(t, out.Bytes())); got != want {
				t.Errorf("%s %s: rows differ:\n%s\nwant\n%s", ext, c.name, got, want)
			}
		}
	}
	if es, _ := os.ReadDir(dir); len(es) != 4 {
		t.Errorf("files left behind: %v", es)
	}
}
