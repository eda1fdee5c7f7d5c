package trace

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadRequests feeds arbitrary bytes to the stream reader and the typed
// decoder: they must return errors, never panic.
func FuzzReadRequests(f *testing.F) {
	var buf bytes.Buffer
	md := NewMeta()
	s := RequestsSchema(md)
	sink, _ := Create("-", &buf, s)
	w := NewRequestWriter(sink, s)
	for _, r := range sampleRequests(6) {
		r := r
		_ = w.Write(&r)
	}
	_ = w.Close()
	valid := buf.Bytes()
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n"))
	var gz bytes.Buffer // tables are also read gzipped
	zw := gzip.NewWriter(&gz)
	zw.Write(valid)
	zw.Close()
	f.Add(gz.Bytes())
	f.Add(gz.Bytes()[:gz.Len()/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := Open("-", bytes.NewReader(data))
		if err != nil {
			return
		}
		defer src.Close()
		reqs, err := ReadAllRequests(src)
		if err == nil {
			for i := range reqs {
				if verr := reqs[i].Validate(); verr != nil {
					t.Fatalf("decoded row %d fails validation: %v", i, verr)
				}
			}
		}
	})
}

// FuzzReadIPCFile feeds arbitrary bytes, as a .arrow file, to the file
// reader (its footer goes to arrow-go only once checked): errors, never a
// panic or an allocation of what a forged footer claims.
func FuzzReadIPCFile(f *testing.F) {
	p := filepath.Join(f.TempDir(), "seed.arrow")
	valid := writeSampleTable(f, p, 6)
	if string(valid[:6]) != "ARROW1" {
		f.Fatalf("%s: not written as an IPC file", p)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-12])
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "x.arrow")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := Open(p, nil)
		if err != nil {
			return
		}
		defer src.Close()
		_, _ = ReadAllRequests(src)
	})
}

// TestByteFlips changes each byte of a valid table, in each format we
// write, to a few values in turn and reads the result: every corruption the
// format lets through must come back as an error, never a panic. Fuzzing
// found one such panic at random (a batch's message table in an IPC file,
// which arrow-go reads without a recover); this walks every position.
func TestByteFlips(t *testing.T) {
	for _, name := range []string{"x.arrow", "x.arrows"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			valid := writeSampleTable(t, filepath.Join(dir, name), 3)
			q := filepath.Join(dir, "flipped-"+name)
			data := make([]byte, len(valid))
			for i := range valid {
				for _, v := range []byte{0x00, 0xff, valid[i] ^ 0x80, valid[i] + 1} {
					if v == valid[i] {
						continue
					}
					copy(data, valid)
					data[i] = v
					if err := os.WriteFile(q, data, 0o644); err != nil {
						t.Fatal(err)
					}
					func() {
						defer func() {
							if p := recover(); p != nil {
								t.Fatalf("byte %d of %d set to %#x: panic: %v", i, len(valid), v, p)
							}
						}()
						src, err := Open(q, nil)
						if err != nil {
							return
						}
						defer src.Close()
						_, _ = ReadAllRequests(src)
					}()
				}
			}
		})
	}
}

// writeSampleTable writes n sample requests to path, in the format its
// extension names, and returns the file's bytes.
func writeSampleTable(t testing.TB, path string, n int) []byte {
	t.Helper()
	s := RequestsSchema(NewMeta())
	sink, err := Create(path, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	w := NewRequestWriter(sink, s)
	for _, r := range sampleRequests(n) {
		r := r
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
	return b
}
