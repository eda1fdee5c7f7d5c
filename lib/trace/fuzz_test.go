package trace

import (
	"bytes"
	"compress/gzip"
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
