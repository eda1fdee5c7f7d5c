package sched

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/latency"
)

// within reports whether the n bytes at p lie inside the n0 bytes at p0.
func within(p unsafe.Pointer, n uintptr, p0 unsafe.Pointer, n0 uintptr) bool {
	a, a0 := uintptr(p), uintptr(p0)
	return n > 0 && a >= a0 && a+n <= a0+n0
}

// The read-ahead's addresses (Hot, Reach, QueueHead) stay inside the
// scheduler, its finish heap, its bucket heads and the KV store's free
// queue at every step of a run, whatever those hold.
func TestReadAheadInBounds(t *testing.T) {
	for _, blocks := range []int32{4096, 40} {
		t.Run(fmt.Sprint(blocks, " blocks"), func(t *testing.T) {
			const B = 16
			cfg := Config{MaxNumBatchedTokens: 256, MaxNumSeqs: 16, Checks: true}
			store := kv.NewPaged(blocks, B)
			s := NewVLLM(cfg, store, &request.Keyer{Block: B}, nil, nil)
			check := func(when string) {
				t.Helper()
				if p, n := s.Hot(); !within(p, n, unsafe.Pointer(s), unsafe.Sizeof(*s)) {
					t.Fatalf("%s: Hot %p+%d outside the scheduler %p+%d", when, p, n, s, unsafe.Sizeof(*s))
				}
				fin, finN, st, heads, headsN := s.Reach()
				if h := s.finishH.s; len(h) > finRoot {
					if !within(fin, finN, unsafe.Pointer(&h[0]), uintptr(len(h))*unsafe.Sizeof(h[0])) || fin != unsafe.Pointer(&h[finRoot]) {
						t.Fatalf("%s: finish range %p+%d, heap %p of %d", when, fin, finN, &h[0], len(h))
					}
				} else if fin != nil {
					t.Fatalf("%s: finish range %p with an empty heap", when, fin)
				}
				if st != unsafe.Pointer(store) {
					t.Fatalf("%s: store %p, want %p", when, st, store)
				}
				if h := s.bound.h; !within(heads, headsN, unsafe.Pointer(&h[0]), uintptr(len(h))*unsafe.Sizeof(h[0])) {
					t.Fatalf("%s: bucket heads %p+%d outside %p of %d", when, heads, headsN, &h[0], len(h))
				}
				if q := s.QueueHead(); q != store.QueueHead() {
					t.Fatalf("%s: queue head %p, the store's %p", when, q, store.QueueHead())
				}
			}
			check("empty")
			for i := range 24 {
				r := testRequest(i)
				s.Enqueue(r)
			}
			var b latency.Batch
			var done []*request.State
			now := int64(0)
			for step := 0; s.HasWork(); step++ {
				if step > 100000 {
					t.Fatal("no progress")
				}
				if !s.Form(now, &b) {
					t.Fatalf("step %d: nothing formed with work left", step)
				}
				check(fmt.Sprintf("step %d formed", step))
				now += 1000
				s.Complete(now, &done)
				check(fmt.Sprintf("step %d completed", step))
			}
		})
	}
}
