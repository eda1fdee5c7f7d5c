package trace

import (
	"io"
	"path/filepath"
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

// BenchmarkResultWriterFleet measures encoding the results of a fleet's
// run: consecutive rows from different replicas (1,000 IDs, each passed as
// the same string every time, as the engine does), 32 prefix hashes a row.
func BenchmarkResultWriterFleet(b *testing.B) {
	hashes := make([]uint64, 32)
	for i := range hashes {
		hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	ids := make([]string, 1<<16)
	for i := range ids {
		ids[i] = "req-" + strconv.Itoa(i)
	}
	reps := make([]string, 1000)
	for i := range reps {
		reps[i] = "replica-" + strconv.Itoa(i)
	}
	s := ResultsSchema(NewMeta())
	sink, err := Create("-", io.Discard, s)
	if err != nil {
		b.Fatal(err)
	}
	w := NewResultWriter(sink, s)
	r := NewResult(NewRequest("x"))
	r.PrefixHashes, r.Status, r.Deployment = hashes, "ok", "default"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.ID = ids[i&(len(ids)-1)]
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i), int32(i%4000+1), int32(i%500+1)
		r.ReplicaID, r.InstanceID = reps[(i*7919)%len(reps)], int32((i*7919)%len(reps))
		r.AdmittedUS, r.RoutedUS, r.EnqueuedUS, r.FirstScheduledUS = int64(i), int64(i), int64(i), int64(i+1)
		r.FirstTokenUS, r.FinishedUS, r.TTFTUS, r.E2EUS, r.TPOTUS = int64(i+2), int64(i+9), 2, 9, 1
		r.GeneratedTokens, r.CachedTokens = r.OutputTokens, 0
		if err := w.Write(&r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRequestReader measures decoding requests (as
// BenchmarkRequestWriter writes them, 32 prefix hashes each) from a file.
func BenchmarkRequestReader(b *testing.B) {
	path := filepath.Join(b.TempDir(), "r.arrow")
	s := RequestsSchema(NewMeta())
	sink, err := Create(path, nil, s)
	if err != nil {
		b.Fatal(err)
	}
	w := NewRequestWriter(sink, s)
	r := NewRequest("x")
	r.TenantID, r.Model, r.PrefixHashes = "acme", "llama", make([]uint64, 32)
	const rows = 200_000
	for i := 0; i < rows; i++ {
		r.ID = "req-" + strconv.Itoa(i)
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i), int32(i%4000+1), int32(i%500+1)
		for k := range r.PrefixHashes {
			r.PrefixHashes[k] = uint64(i*64+k) * 0x9e3779b97f4a7c15
		}
		if err := w.Write(&r); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		src, err := Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		rr, err := NewRequestReader(src)
		if err != nil {
			b.Fatal(err)
		}
		var buf []Request
		for n < b.N {
			buf, err = rr.Next(buf)
			n += len(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		src.Close()
	}
}
