package parquetio

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// Parquet keeps every value and the schema metadata (table kind, provenance),
// and dictionary columns come back as plain strings that the typed readers accept.
func TestParquetRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "req.parquet")
	md := trace.NewMeta()
	md.Set(trace.MetaPrefixBlockSize, "512")
	md = md.With(trace.Stage{Tool: "test", Version: trace.Version})
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(path, nil, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, schema)
	var want []trace.Request
	for i := 0; i < trace.BatchRows+10; i++ {
		r := trace.NewRequest("r" + string(rune('a'+i%26)) + "-" + string(rune('0'+i%10)) + "-" + string(rune('0'+i/10%10)) + string(rune('0'+i/100%10)) + string(rune('0'+i/1000%10)) + string(rune('0'+i/10000%10)))
		r.ArrivalUS = int64(i * 10)
		r.InputTokens, r.OutputTokens = int32(i%500+1), int32(i%30+1)
		r.TenantID = []string{"", "a", "b"}[i%3]
		if i%7 == 0 {
			r.PrefixHashes = []uint64{uint64(i), 1 << 63}
		}
		if i%11 == 0 && i > 0 {
			r.ArrivalUS, r.DependsOn, r.DelayUS = trace.Null, []string{want[i-1].ID}, 5
		}
		want = append(want, r)
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The footer's row count gives blis-sim's progress line its total.
	if n, ok := trace.CountRows(path); !ok || n != int64(len(want)) {
		t.Errorf("CountRows = %d, %v; want %d", n, ok, len(want))
	}
	src, err := trace.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if m := src.Meta(); m.Table() != trace.TableRequests || m.Get(trace.MetaPrefixBlockSize) != "512" || len(m.Provenance) != 1 {
		t.Fatalf("metadata lost: table=%q block=%q provenance=%v", m.Table(), m.Get(trace.MetaPrefixBlockSize), m.Provenance)
	}
	got, err := trace.ReadAllRequests(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("row %d: got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}
