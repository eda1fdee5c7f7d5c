package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/row"
)

// uniqueFirsts gives every request's prefix hashes a first entry of its
// own (keeping their count), so that the blis.prefix_unique promise holds.
func uniqueFirsts(reqs []row.Request) {
	for i := range reqs {
		h := reqs[i].PrefixHashes
		for j := range h {
			h[j] = uint64(i+1)<<40 | uint64(j)
		}
	}
}

// FuzzPrefixUnique is FuzzRun's cluster space on workloads whose prompts
// share no first block: a run with the promise (Options.PrefixUnique,
// records for first blocks only) and one without give the same results,
// summary, scale events and decisions. Its small caches preempt and evict
// often, so private runs are evicted, preempted requests look their own
// blocks up again (Expose) and blocked admissions ask about them.
func FuzzPrefixUnique(f *testing.F) {
	f.Add([]byte("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01\x05\xff\x30\x00\x05\x02\x02"), uint8(30), uint8(0))
	f.Add([]byte("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02\x00\x90\x60\x01\x02\x03\x00"), uint8(12), uint8(1))
	f.Add([]byte(strings.Repeat("\x10\x90\xff\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02", 4)), uint8(0x8b), uint8(0x2b))
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x13), uint8(0x0a))
	f.Add([]byte(strings.Repeat("\x01\x40\xf0\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01", 4)), uint8(0x05), uint8(0x15))
	f.Add([]byte(strings.Repeat("\x00\xc0\x90\x01\x02\x03\x00\x00\xc0\x90\x01\x02\x03\x01", 6)), uint8(13), uint8(0x00))
	f.Add([]byte(strings.Repeat("\x00\xc0\x90\x01\x02\x03\x00\x00\xc0\x90\x01\x02\x03\x01", 6)), uint8(14), uint8(0x05))
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x02), uint8(0x11))
	f.Fuzz(func(t *testing.T, b []byte, kv, routing uint8) {
		c, models, reqs := fuzzCase(t, b, kv, routing)
		uniqueFirsts(reqs)
		opts := Options{}
		if len(b)%2 == 0 {
			opts.Decisions = &traceLog{}
		}
		sameRuns(t, c, models, reqs, opts, [2]string{"with records", "unique"}, func(o *Options, second bool) { o.PrefixUnique = second })
	})
}

// TestPrefixUniqueSweep is FuzzPrefixUnique over the cluster space on one
// workload (every feature bit of FuzzRun's, each router), with caches from
// 14 to 65 blocks: private runs are evicted, and preempted requests expose
// their blocks and hit them again.
func TestPrefixUniqueSweep(t *testing.T) {
	b := []byte(strings.Repeat("\x00\xc0\x90\x01\x02\x03\x00\x00\xc0\x90\x01\x02\x03\x01", 6))
	step := 3
	if testing.Short() {
		step = 17
	}
	for kv := 12; kv < 256; kv += step {
		for routing := range 8 {
			c, models, reqs := fuzzCase(t, b, uint8(kv), uint8(routing|kv&0xf8))
			uniqueFirsts(reqs)
			sameRuns(t, c, models, reqs, Options{}, [2]string{"with records", "unique"}, func(o *Options, second bool) { o.PrefixUnique = second })
		}
	}
}

// A broken promise fails the run rather than missing cache hits: two
// requests share a first prefix hash on one replica, the second arriving
// while the first's blocks are cached.
func TestPrefixUniqueClash(t *testing.T) {
	c, models, _ := fuzzCase(t, nil, 0, 0)
	c.Replicas = 1
	c.Engine.KVBlocks = 64
	var reqs []row.Request
	for i := range 2 {
		r := row.NewRequest([]string{"a", "b"}[i])
		r.ArrivalUS = int64(i) * 200_000
		r.InputTokens, r.OutputTokens = 64, 4
		r.PrefixHashes = []uint64{7, 8, 9, 10}
		reqs = append(reqs, r)
	}
	sink := &memSink{}
	_, err := Run(c, models, SliceSource(reqs), sink, Options{PrefixUnique: true, CheckInvariants: true})
	if !errors.Is(err, cluster.ErrPrefixClash) {
		t.Fatalf("run with a broken promise: %v, want %v", err, cluster.ErrPrefixClash)
	}
	// Without the promise, the second request hits the first's blocks.
	sink = &memSink{}
	if _, err := Run(c, models, SliceSource(reqs), sink, Options{CheckInvariants: true}); err != nil {
		t.Fatal(err)
	}
	if got := sink.rs[len(sink.rs)-1].CachedTokens; got == 0 {
		t.Fatalf("without the promise the second request found no cached tokens")
	}
}
