package trace

import (
	"bytes"
	"testing"
)

// Rows with default tiered-KV/P-D columns are appended in bulk; mixed with
// rows that have values, across batch boundaries, every row reads back as
// written.
func TestResultKVColumnsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	schema := ResultsSchema(NewMeta())
	sink, err := Create("-", &buf, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := NewResultWriter(sink, schema)
	var want []Result
	for i := 0; i < 2*BatchRows+5; i++ {
		r := NewResult(NewRequest("r"))
		r.Status, r.ArrivalUS, r.InputTokens = StatusCompleted, int64(i), 10
		r.CachedTokens, r.CachedTokensGPU = int32(i%50), int32(i%50)
		if i%997 == 3 || i == BatchRows-1 {
			r.CachedTokensCPU, r.CachedTokensStorage, r.KVReloadUS, r.KVThrashTokens = 16, 32, int64(i), 1
			r.PrefillReplica, r.DecodeReplica = "d/0", "d/1"
			r.KVTransferUS, r.KVTransferWaitUS, r.KVTransferBytes = 120, 7, 1000
		}
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := Open("-", &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := ReadAllResults(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		g, x := got[i], want[i]
		if g.CachedTokensGPU != x.CachedTokensGPU || g.CachedTokensCPU != x.CachedTokensCPU || g.CachedTokensStorage != x.CachedTokensStorage ||
			g.KVReloadUS != x.KVReloadUS || g.KVThrashTokens != x.KVThrashTokens || g.PrefillReplica != x.PrefillReplica ||
			g.DecodeReplica != x.DecodeReplica || g.KVTransferUS != x.KVTransferUS || g.KVTransferWaitUS != x.KVTransferWaitUS || g.KVTransferBytes != x.KVTransferBytes {
			t.Fatalf("row %d: got %+v, want %+v", i, g, x)
		}
	}
}
