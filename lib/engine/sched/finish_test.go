package sched

import (
	"math"
	"slices"
	"testing"

	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/rng"
)

// finModel is the simple version of finishHeap: a list of (step, push
// number, request) popped in that order.
type finModel struct {
	e   []finModelEntry
	seq int
}

type finModelEntry struct {
	step int64
	seq  int
	r    *request.State
}

func (m *finModel) push(step int64, r *request.State) {
	m.seq++
	m.e = append(m.e, finModelEntry{step, m.seq, r})
	slices.SortFunc(m.e, func(a, b finModelEntry) int {
		if a.step != b.step {
			return int(a.step - b.step)
		}
		return a.seq - b.seq
	})
}

func (m *finModel) popDue(step int64) *request.State {
	for len(m.e) > 0 && m.e[0].step <= step {
		x := m.e[0]
		m.e = m.e[1:]
		if x.r != nil {
			return x.r
		}
	}
	return nil
}

func (m *finModel) firstLive() (int64, bool) {
	for len(m.e) > 0 {
		if m.e[0].r != nil {
			return m.e[0].step, true
		}
		m.e = m.e[1:]
	}
	return 0, false
}

func (m *finModel) forget(r *request.State) {
	for i := range m.e {
		if m.e[i].r == r {
			m.e[i].r = nil
			return
		}
	}
}

// TestFinishHeap runs finishHeap against finModel: pushes of finish steps
// from the current step on (many ties), forgets, pops of what is due as
// the step advances, firstLive, a clone; from step 0, from just below 2³²
// (the stored steps wrap) and with push numbers about to wrap (renumbered).
func TestFinishHeap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start int64
		seq   uint32
		span  int64 // finish steps up to this far ahead
	}{
		{"small", 0, 0, 40},
		{"wide", 0, 0, 5000},
		{"steps wrap", 1<<32 - 300, 0, 700},
		{"far steps", 7<<32 + 11, 0, math.MaxInt32 - 1},
		{"push numbers wrap", 1000, math.MaxUint32 - 150, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := rng.New(7, "finish "+tc.name)
			var h finishHeap
			h.seq = tc.seq
			var m finModel
			states := make([]*request.State, 300)
			for i := range states {
				states[i] = &request.State{}
				states[i].Req.ID = string(rune('a' + i%26))
			}
			var live []*request.State
			now := tc.start
			for round := range 3000 {
				switch k := g.IntN(10); {
				case k < 5 && len(live) < len(states):
					r := states[(round*7)%len(states)]
					if slices.Contains(live, r) {
						break
					}
					d := 1 + g.Int64N(tc.span)
					if g.IntN(3) == 0 {
						d = 1 + int64(round%5) // ties
					}
					h.push(now+d, r)
					m.push(now+d, r)
					live = append(live, r)
				case k < 6 && len(live) > 0:
					i := g.IntN(len(live))
					h.forget(live[i])
					m.forget(live[i])
					live = slices.Delete(live, i, i+1)
				default:
					// A step ends: its due entries, in order.
					for {
						got, want := h.popDue(now), m.popDue(now)
						if got != want {
							t.Fatalf("round %d, step %d: popDue gave %p, want %p", round, now, got, want)
						}
						if got == nil {
							break
						}
						live = slices.DeleteFunc(live, func(x *request.State) bool { return x == got })
					}
					got, okg := h.firstLive(now + 1)
					want, okw := m.firstLive()
					if got != want || okg != okw {
						t.Fatalf("round %d: firstLive %d %v, want %d %v", round, got, okg, want, okw)
					}
					if okw && g.IntN(4) == 0 {
						now = want - 1 // leap to just before the next finish
					} else {
						now++
					}
				}
				if h.len() != len(m.e) {
					t.Fatalf("round %d: %d entries, want %d", round, h.len(), len(m.e))
				}
			}
			// A clone pops what the original would, with mapped requests.
			c := &request.Clone{}
			c.Reset(-1)
			d := h.clone(c)
			for len(m.e) > 0 {
				now = max(now, m.e[0].step) // (its step: none due before)
				for {
					got, want := d.popDue(now), m.popDue(now)
					if (got == nil) != (want == nil) || got != nil && (got == want || got.Req.ID != want.Req.ID) {
						t.Fatalf("clone at step %d: popDue gave %v, want a copy of %v", now, got, want)
					}
					if got == nil {
						break
					}
				}
			}
			if tc.seq > 0 && h.seq > 1<<20 {
				t.Fatalf("push numbers never renumbered (at %d)", h.seq)
			}
		})
	}
}
