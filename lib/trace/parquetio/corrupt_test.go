package parquetio

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// TestForgedStoredSchema: a file whose ARROW:schema metadata claims a
// field with hundreds of millions of children (found by FuzzReadParquet;
// arrow-go allocated 31 GB for it and the process died) is an error that
// names the metadata.
func TestForgedStoredSchema(t *testing.T) {
	corpus, err := os.ReadFile("testdata/fuzz/FuzzReadParquet/be6b3b8f7422236e")
	if err != nil {
		t.Fatal(err)
	}
	// go test fuzz v1: one line holding []byte("...") in Go syntax.
	line := strings.TrimSpace(strings.SplitN(string(corpus), "\n", 2)[1])
	data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "forged.parquet")
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = trace.Open(p, nil)
	if err == nil || !strings.Contains(err.Error(), "ARROW:schema") || !strings.Contains(err.Error(), "forged.parquet") {
		t.Fatalf("got %v, want an error naming the file and the ARROW:schema metadata", err)
	}
	t.Log(err)
}
