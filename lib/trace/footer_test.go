package trace

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An IPC file's footer is checked before arrow-go reads it: a forged
// vtable or vector length is an error naming the footer, not an allocation.
func TestFileFooterChecked(t *testing.T) {
	dir := t.TempDir()
	valid := writeSampleTable(t, filepath.Join(dir, "ok.arrow"), 3)
	n := int(binary.LittleEndian.Uint32(valid[len(valid)-10:]))
	start := len(valid) - 10 - n // the footer flatbuffer
	fb := fbuf(valid[start : start+n])
	root, _ := fb.u32(0)
	ft, err := fb.table(root)
	if err != nil {
		t.Fatal(err)
	}
	batches, _, _ := fb.ref(ft, 3) // recordBatches: a vector of 24-byte blocks
	for _, c := range []struct {
		name  string
		patch func(b []byte)
		want  string
	}{
		{"valid", func([]byte) {}, ""},
		{"odd vtable", func(b []byte) { binary.LittleEndian.PutUint16(b[start+ft.vt:], uint16(ft.vsize+1)) }, "not a valid flatbuffer"},
		{"forged block count", func(b []byte) { binary.LittleEndian.PutUint32(b[start+batches:], 1<<30) }, "vector of 1073741824 elements"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := append([]byte(nil), valid...)
			c.patch(b)
			q := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".arrow")
			if err := os.WriteFile(q, b, 0o644); err != nil {
				t.Fatal(err)
			}
			src, err := Open(q, nil)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				if rs, err := ReadAllRequests(src); err != nil || len(rs) != 3 {
					t.Fatalf("%d rows, %v", len(rs), err)
				}
				return
			}
			if err == nil {
				src.Close()
				t.Fatalf("opened; want an error with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "footer") {
				t.Fatalf("error %q, want one naming the footer and %q", err, c.want)
			}
		})
	}
}
