package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Anything that is not an Arrow table says what it looks like and points
// to blis-convert, instead of "corrupt Arrow stream: message metadata
// length 1162692948".
func TestOpenNonArrowSaysWhatItIs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,4808,10\n",
			`a.csv: this is CSV (first line: "TIMESTAMP,ContextTokens,GeneratedTokens"), not an Arrow table: convert it first with blis-convert (blis-convert ` + dir + `/a.csv | …`},
		{"b.json", `{"requests": [1, 2]}`, `b.json: this is JSON (first line: "{\"requests\": [1, 2]}"), not an Arrow table: convert it first with blis-convert`},
		{"c.jsonl", "{\"a\":1}\n{\"a\":2}\n", `c.jsonl: this is JSON lines (first line: "{\"a\":1}")`},
		{"d.tsv", "a\tb\n1\t2\n", `d.tsv: this is TSV`},
		{"e.md", "# Title, with a comma\n\nSome text.\n", `e.md: this is text (first line: "# Title, with a comma")`},
		{"f.gz", "\x1f\x8b\x08\x00\x00\x00", `f.gz: gzip-compressed data that cannot be decompressed`},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v\nwant it to contain %s", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "metadata length") {
			t.Errorf("%s: the Arrow reader's message leaks: %v", tc.name, err)
		}
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: %T is not an InputError (exit 2)", tc.name, err)
		}
		// The same on stdin (gzip is read there too: a cut one says so).
		_, err = Open("-", bytes.NewReader([]byte(tc.content)))
		if strings.HasSuffix(tc.name, ".gz") {
			if err == nil || !strings.Contains(err.Error(), "cannot be decompressed") {
				t.Errorf("%s on stdin: error %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "stdin holds ") || !strings.Contains(err.Error(), "blis-convert") {
			t.Errorf("%s on stdin: error %v", tc.name, err)
		}
	}
}

// An IPC file under a name that does not say so is read as one.
func TestOpenIPCFileByContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.arrow")
	if err := writeAll(t, p, 5, false); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	q := filepath.Join(dir, "out.dat")
	if err := os.WriteFile(q, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := rows(t, q); n != 5 {
		t.Fatalf("%d rows, want 5", n)
	}
}
