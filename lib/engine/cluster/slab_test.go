package cluster

import (
	"testing"

	"github.com/blis-sim/blis/lib/engine/request"
)

// newState hands out distinct, reset States, carving slabs that double up
// to stateSlabMax, and reuses pooled States (last freed first) before
// carving.
func TestNewStateSlabs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int // States asked for
		free    int // of them returned to the pool, then asked for again
		wantCap int // the last slab's size
	}{
		{"one", 1, 0, stateSlabMin},
		{"first slab", stateSlabMin, 0, stateSlabMin},
		{"second slab", stateSlabMin + 1, 0, 2 * stateSlabMin},
		{"at the cap", 2000, 0, stateSlabMax},
		{"pooled first", 100, 40, 4 * stateSlabMin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Cluster
			seen := map[*request.State]bool{}
			var got []*request.State
			for i := 0; i < tc.n; i++ {
				r := c.newState()
				if seen[r] {
					t.Fatalf("state %d handed out twice", i)
				}
				if r.Replica != -1 || r.WIdx != -1 || r.Epoch != 1 {
					t.Fatalf("state %d not reset: replica %d, widx %d, epoch %d", i, r.Replica, r.WIdx, r.Epoch)
				}
				r.Replica = int32(i)
				seen[r] = true
				got = append(got, r)
			}
			c.pool = append(c.pool, got[:tc.free]...)
			for i := tc.free - 1; i >= 0; i-- {
				if r := c.newState(); r != got[i] || r.Replica != -1 {
					t.Fatalf("reuse %d: got %p (replica %d), want pooled %p reset", i, r, r.Replica, got[i])
				}
			}
			if c.slabN != tc.wantCap {
				t.Fatalf("last slab of %d States, want %d", c.slabN, tc.wantCap)
			}
		})
	}
}
