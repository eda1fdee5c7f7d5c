package trace

import (
	"bytes"
	"slices"
	"testing"
)

// Rows with default tiered-KV/P-D columns are appended in bulk; mixed with
// rows that have values, across batch boundaries, every row reads back as
// written.
func TestResultKVColumnsRoundTrip(t *testing.T) {
	for _, tiers := range [][]string{nil, {"cpu", "storage", "cxl", "remote"}} {
		md := NewMeta()
		md.SetKVTiers(tiers)
		roundTripKV(t, md, len(tiers))
	}
}

func roundTripKV(t *testing.T, md Meta, ntiers int) {
	var buf bytes.Buffer
	schema := ResultsSchema(md)
	if ntiers > 2 && schema.Field(schema.NumFields()-1).Name != "cached_tokens_remote" {
		t.Fatalf("no column for the tier remote: %v", schema)
	}
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
			r.CachedTokensTier = []int32{16, 32}
			if ntiers > 2 {
				r.CachedTokensTier = []int32{16, 32, 48, int32(i)}
			}
			r.KVReloadUS, r.KVThrashTokens = int64(i), 1
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
		if g.CachedTokensGPU != x.CachedTokensGPU || !slices.Equal(g.CachedTokensTier, x.CachedTokensTier) ||
			g.KVReloadUS != x.KVReloadUS || g.KVThrashTokens != x.KVThrashTokens || g.PrefillReplica != x.PrefillReplica ||
			g.DecodeReplica != x.DecodeReplica || g.KVTransferUS != x.KVTransferUS || g.KVTransferWaitUS != x.KVTransferWaitUS || g.KVTransferBytes != x.KVTransferBytes {
			t.Fatalf("row %d: got %+v, want %+v", i, g, x)
		}
	}
}
