package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/blis-sim/blis/lib/engine/request"
)

// The index agrees with a Go map over random puts, duplicate puts, gets
// and removes, through growth and long probe runs that wrap the table.
func TestIDIndexAgreesWithMap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   int
		ids   int // distinct IDs drawn from
		rmPct int
	}{
		{"small", 2000, 300, 40},
		{"grows", 20000, 5000, 20},
		{"churn", 50000, 1500, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, uint64(tc.ops)))
			x := newIDIndex()
			want := map[string]*request.State{}
			for op := 0; op < tc.ops; op++ {
				id := fmt.Sprintf("req-%d", rnd.IntN(tc.ids))
				switch {
				case rnd.IntN(100) < tc.rmPct:
					r := want[id]
					if r == nil {
						r = &request.State{}
						r.Req.ID = id
					}
					x.remove(r) // absent: no-op
					delete(want, id)
				default:
					r := &request.State{}
					r.Req.ID = id
					x.warmID(id) // a hint: changes nothing ("grows" passes warmSlots)
					got := x.put(r)
					if got != want[id] {
						t.Fatalf("op %d: put(%s) = %p, want %p", op, id, got, want[id])
					}
					if got == nil {
						want[id] = r
					}
				}
				if x.len() != len(want) {
					t.Fatalf("op %d: len %d, want %d", op, x.len(), len(want))
				}
			}
			for i := 0; i < tc.ids; i++ {
				id := fmt.Sprintf("req-%d", i)
				if got := x.get(id); got != want[id] {
					t.Fatalf("get(%s) = %p, want %p", id, got, want[id])
				}
			}
			c := x.clone(func(r *request.State) *request.State { return r })
			for id, r := range want {
				if c.get(id) != r {
					t.Fatalf("clone: get(%s) differs", id)
				}
			}
		})
	}
	var empty idIndex
	empty.warmID("x")
	if empty.get("x") != nil {
		t.Fatal("empty index found x")
	}
}
