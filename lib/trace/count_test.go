package trace

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCountRows(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 5, 2*BatchRows + 7} {
		for _, ext := range []string{".arrows", ".arrow"} {
			p := filepath.Join(dir, "t"+ext)
			if err := writeAll(t, p, n, false); err != nil {
				t.Fatal(err)
			}
			got, ok := CountRows(p)
			if !ok || got != int64(n) {
				t.Errorf("%d rows as %s: CountRows = %d, %v", n, ext, got, ok)
			}
		}
	}
	// Not a table, or not a file: no count.
	txt := filepath.Join(dir, "a.csv")
	os.WriteFile(txt, []byte("a,b\n1,2\n"), 0o644)
	for _, p := range []string{txt, "-", filepath.Join(dir, "missing.arrows"), dir} {
		if n, ok := CountRows(p); ok {
			t.Errorf("%s: CountRows = %d, true; want no count", p, n)
		}
	}
}

func FuzzCountRows(f *testing.F) {
	dir := f.TempDir()
	p := filepath.Join(dir, "seed.arrows")
	s := RequestsSchema(NewMeta())
	sink, _ := Create(p, nil, s)
	w := NewRequestWriter(sink, s)
	for _, r := range sampleRequests(3) {
		w.Write(&r)
	}
	w.Close()
	b, _ := os.ReadFile(p)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		q := filepath.Join(t.TempDir(), "x.arrows")
		if err := os.WriteFile(q, data, 0o644); err != nil {
			t.Fatal(err)
		}
		CountRows(q) // must not panic or allocate what a header claims
	})
}

// BenchmarkCountRows counts the rows of a 3.3M-row table (100 batches).
func BenchmarkCountRows(b *testing.B) {
	dir := b.TempDir()
	p := filepath.Join(dir, "t.arrows")
	s := RequestsSchema(NewMeta())
	sink, err := Create(p, nil, s)
	if err != nil {
		b.Fatal(err)
	}
	w := NewRequestWriter(sink, s)
	rs := sampleRequests(1)
	for i := 0; i < 100*BatchRows; i++ {
		r := rs[0]
		r.ID = ""
		r.ArrivalUS = int64(i)
		if err := w.Write(&r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, ok := CountRows(p); !ok || n != 100*BatchRows {
			b.Fatal(n, ok)
		}
	}
}
