package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/blis-sim/blis/lib/engine/row"
)

// fakeOracle is a global prefix index's answer for one request.
type fakeOracle struct {
	cached  map[int]int
	holders []int32
}

func (o *fakeOracle) CachedBlocks(i int) int   { return o.cached[i] }
func (o *fakeOracle) Holders() ([]int32, bool) { return o.holders, true }

// TestWeightedIndexMatchesScan routes over random boards twice: through
// the kvIndex (a board whose replicas in spans report KV use only when
// read, as the cluster's do) and by the full scan over the true statuses
// (scores kept, which always scans), with and without prompt blocks held
// by a few replicas. Small KV totals and few loads make ties, equal
// fractions over different totals and rounding collisions common.
func TestWeightedIndexMatchesScan(t *testing.T) {
	weights := []float64{0, 0.1, 0.5, 1, 2, 3, 1e-9, 1e9}
	totalSets := [][]int64{{1000}, {1000, 1001}, {3, 6, 9}, {28000, 14000}, {1, 2}}
	for seed := uint64(1); seed <= 60; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 7))
		n := 20 + rnd.IntN(200)
		totals := totalSets[rnd.IntN(len(totalSets))]
		p := weighted{load: weights[rnd.IntN(len(weights))], kv: weights[1+rnd.IntN(len(weights)-1)], prefix: float64(rnd.IntN(2))}
		maxLoad := 1 + rnd.IntN(6)
		ids := make([]string, n)
		deps, roles := make([]string, n), make([]string, n)
		for i := range ids {
			ids[i], deps[i], roles[i] = fmt.Sprint("r", i), "d", "monolithic"
		}
		truth := NewBoard(ids, deps, roles, 1)
		lazy := NewBoard(ids, deps, roles, 1)
		status := func() ReplicaStatus {
			tot := totals[rnd.IntN(len(totals))]
			return ReplicaStatus{Waiting: rnd.IntN(maxLoad), Running: rnd.IntN(2), KVUsed: rnd.Int64N(tot + 1), KVTotal: tot}
		}
		true_ := make([]ReplicaStatus, n) // what a read reports
		lazy.OnRead(func(i int) {
			lazy.Set(i, true_[i])
			lazy.SetVolatile(i, math.MaxInt64)
		})
		// set reports s on both boards, the lazy one maybe behind: a
		// replica in a span has taken blocks since it last reported.
		set := func(i int, s ReplicaStatus) {
			true_[i] = s
			truth.Set(i, s)
			if rnd.IntN(3) == 0 && s.KVUsed > 0 {
				r := s
				r.KVUsed -= rnd.Int64N(s.KVUsed + 1)
				lazy.Set(i, r)
				lazy.SetVolatile(i, 0)
				return
			}
			lazy.Set(i, s)
			lazy.SetVolatile(i, math.MaxInt64)
		}
		for i := 0; i < n; i++ {
			set(i, status())
		}
		for round := 0; round < 200; round++ {
			now := int64(round)
			// Half the requests have prompt blocks, some held by a few
			// replicas (a global prefix index's holders).
			pb, o := 0, &fakeOracle{cached: map[int]int{}}
			if rnd.IntN(2) == 0 {
				pb = 1 + rnd.IntN(8)
				for k := rnd.IntN(4); k > 0; k-- {
					i := rnd.IntN(n)
					if _, dup := o.cached[i]; !dup {
						o.cached[i] = 1 + rnd.IntN(pb)
						o.holders = append(o.holders, int32(i))
					}
				}
			}
			rv := NewRequestView(&row.Request{}, now, func() int { return pb })
			got := p.Route(rv, lazy.View(now, o, false))
			want := p.Route(rv, truth.View(now, o, true))
			if got.Target != want.Target || got.Reason != want.Reason {
				t.Fatalf("seed %d round %d (weights %v, totals %v, %d prompt blocks, cached %v): index chose %d, scan %d", seed, round, p, totals, pb, o.cached, got.Target, want.Target)
			}
			switch rnd.IntN(3) {
			case 0:
				truth.AddInFlight(want.Target)
				lazy.AddInFlight(want.Target)
				true_[want.Target].InFlight++
			default:
				for k := rnd.IntN(4); k >= 0; k-- {
					set(rnd.IntN(n), status())
				}
			}
		}
	}
}
