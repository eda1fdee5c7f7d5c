package parquetio

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// FuzzReadParquet feeds arbitrary bytes, as a .parquet file, to the reader:
// errors, never a panic.
func FuzzReadParquet(f *testing.F) {
	p := filepath.Join(f.TempDir(), "seed.parquet")
	s := trace.RequestsSchema(trace.NewMeta())
	sink, err := trace.Create(p, nil, s)
	if err != nil {
		f.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, s)
	for i := 0; i < 20; i++ {
		r := trace.NewRequest("r" + string(rune('a'+i)))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i)*1000, int32(i+1), int32(2*i+1)
		r.TenantID = []string{"", "a"}[i%2]
		if err := w.Write(&r); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	valid, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "x.parquet")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := trace.Open(p, nil)
		if err != nil {
			return
		}
		defer src.Close()
		_, _ = trace.ReadAllRequests(src)
	})
}
