package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// compressedTable writes 1,000 zero int64s (an 8,000-byte buffer, stored
// compressed) as an IPC file or stream with codec opt.
func compressedTable(t *testing.T, path string, file bool, opt ipc.Option) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := 0; i < 1000; i++ {
		b.Append(0)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 1000)
	defer rec.Release()
	var buf bytes.Buffer
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if file {
		fw, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), opt)
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	} else {
		w = ipc.NewWriter(&buf, ipc.WithSchema(schema), opt)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func countRows(path string) (rows int64, err error) {
	src, err := Open(path, nil)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	for {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows += rec.NumRows()
	}
}

// TestCompressedBodies: lz4- and zstd-compressed tables (pyarrow and
// arrow-go write them on request) are read; one whose buffer claims an
// uncompressed length its bytes cannot hold is an error, not an allocation
// of that length (fuzzing found a file claiming 136 GiB, which killed the
// process).
func TestCompressedBodies(t *testing.T) {
	var want [8]byte
	binary.LittleEndian.PutUint64(want[:], 8000)
	for _, c := range []struct {
		name string
		file bool
		opt  ipc.Option
	}{
		{"x.arrow", true, ipc.WithZstd()},
		{"x.arrow", true, ipc.WithLZ4()},
		{"x.arrows", false, ipc.WithZstd()},
		{"x.arrows", false, ipc.WithLZ4()},
	} {
		p := filepath.Join(t.TempDir(), c.name)
		data := compressedTable(t, p, c.file, c.opt)
		if n, err := countRows(p); err != nil || n != 1000 {
			t.Fatalf("%s (file %v): read %d rows, %v; want 1000", c.name, c.file, n, err)
		}
		i := bytes.Index(data, want[:])
		if i < 0 || bytes.Contains(data[i+1:], want[:]) {
			t.Fatalf("%s: the buffer's length prefix (8000) is not found exactly once", c.name)
		}
		forged := bytes.Clone(data)
		binary.LittleEndian.PutUint64(forged[i:], 136<<30)
		if err := os.WriteFile(p, forged, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := countRows(p); err == nil || !strings.Contains(err.Error(), "claims") {
			t.Errorf("%s (file %v): forged uncompressed length: %v, want an error saying what it claims", c.name, c.file, err)
		}
	}
}
