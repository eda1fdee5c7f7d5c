package trace

import (
	"io"
	"strconv"
	"testing"
)

// BenchmarkRequestWriter measures encoding typical requests (id, arrival,
// lengths, a tenant, 64 prefix hashes) into an IPC stream.
func BenchmarkRequestWriter(b *testing.B) {
	hashes := make([]uint64, 64)
	for i := range hashes {
		hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = "req-" + strconv.Itoa(i)
	}
	s := RequestsSchema(NewMeta())
	sink, err := Create("-", io.Discard, s)
	if err != nil {
		b.Fatal(err)
	}
	w := NewRequestWriter(sink, s)
	r := NewRequest("x")
	r.TenantID, r.Model, r.PrefixHashes = "acme", "llama", hashes
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.ID = ids[i&(len(ids)-1)]
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i), int32(i%4000+1), int32(i%500+1)
		if err := w.Write(&r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
