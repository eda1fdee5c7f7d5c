package cluster

import (
	"math/rand/v2"
	"testing"

	"github.com/blis-sim/blis/lib/engine/internal/minheap"
)

// The written-out event queue keeps the generic heap's layout after every
// push and pop (so a run pops events in the same order, ties included),
// and pops in (t, key) order.
func TestEvqMatchesGenericHeap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ops, times int
		pushPct    int
	}{
		{"growing", 3000, 50, 70},
		{"steady", 5000, 1000, 50},
		{"ties", 3000, 3, 60}, // few distinct times: keys decide
		{"draining", 2000, 200, 35},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.ops)))
			var q evq
			var g minheap.Heap[event, *event]
			lastT, lastKey := int64(-1), uint64(0)
			for op := 0; op < tc.ops; op++ {
				if len(q.S) == 0 || rng.IntN(100) < tc.pushPct {
					// Never before the last pop, as in a run.
					e := event{t: max(lastT, 0) + int64(rng.IntN(tc.times)), key: rng.Uint64N(1 << 20), tag: uint64(op)}
					if e.t == lastT {
						e.key += lastKey
					}
					q.Push(e)
					g.Push(e)
				} else {
					a, b := q.Pop(), g.Pop()
					if a != b {
						t.Fatalf("op %d: popped %+v, the generic heap %+v", op, a, b)
					}
					if a.t < lastT || a.t == lastT && a.key < lastKey {
						t.Fatalf("op %d: popped (%d, %d) after (%d, %d)", op, a.t, a.key, lastT, lastKey)
					}
					lastT, lastKey = a.t, a.key
				}
				if len(q.S) != len(g.S) {
					t.Fatalf("op %d: %d events, the generic heap %d", op, len(q.S), len(g.S))
				}
				for i := range q.S {
					if q.S[i] != g.S[i] {
						t.Fatalf("op %d: slot %d holds %+v, the generic heap's %+v", op, i, q.S[i], g.S[i])
					}
				}
			}
		})
	}
}
