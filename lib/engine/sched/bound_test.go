package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/latency"
)

// TestBoundEntries runs schedulers to the end, with room to spare and with
// preemptions, with and without cache keys past the prompt (a dependent
// naming the answer's blocks), and checks after every step that each
// decoding request has one live block-boundary entry agreeing with its
// State (checkBound), that stale entries are marked, that a wrong entry is
// caught, and (the store's checks) that every block counted in an entry is
// released.
func TestBoundEntries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		blocks int32
		keyed  bool // keys cover the answer's blocks
	}{
		{"roomy", 4096, false},
		{"roomy keyed", 4096, true},
		{"tight", 40, false},
		{"tight keyed", 40, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const B = 16
			cfg := Config{MaxNumBatchedTokens: 256, MaxNumSeqs: 16, Checks: true}
			keys := &request.Keyer{Block: B}
			s := NewVLLM(cfg, kv.NewPaged(tc.blocks, B), keys, nil, nil)
			var rs []*request.State
			for i := range 24 {
				r := testRequest(i)
				if tc.keyed {
					n := (r.Req.InputTokens + r.Req.OutputTokens - 1) / B
					for k := range n {
						r.Keys = append(r.Keys, uint64(i)<<32|uint64(k)+1)
					}
				}
				r.KeysB = B // derived: Ensure keeps them
				s.Enqueue(r)
				rs = append(rs, r)
			}
			var b latency.Batch
			var done []*request.State
			now, corrupted := int64(0), false
			for step := 0; s.HasWork(); step++ {
				if step > 100000 {
					t.Fatal("no progress")
				}
				if !s.Form(now, &b) {
					t.Fatalf("step %d: nothing formed with work left", step)
				}
				if err := s.Check(true); err != nil {
					t.Fatal(err)
				}
				now += 1000
				s.Complete(now, &done)
				for p := range s.bound.h {
					for _, x := range s.bound.at(int64(p)) {
						if x.r != nil && !x.r.Decoding {
							t.Fatalf("step %d: live entry of %s, which is not decoding", step, x.r.Req.ID)
						}
					}
				}
				if !corrupted && s.nDecode > 0 {
					x := s.liveEntry(t)
					x.ids++
					if err := s.checkBound(); err == nil || !strings.Contains(err.Error(), "block-boundary entry says") {
						t.Fatalf("a wrong count of keyed blocks passed the check: %v", err)
					}
					x.ids--
					corrupted = true
				}
			}
			if err := s.kv.Check(); err != nil {
				t.Fatal(err)
			}
			if u := s.kv.Used(); u != 0 {
				t.Fatalf("%d blocks still used after every request finished", u)
			}
			if len(done) != len(rs) {
				t.Fatalf("%d of %d requests finished", len(done), len(rs))
			}
			if tc.blocks == 40 && s.Preemptions() == 0 {
				t.Fatal("the tight case preempted nobody")
			}
			for p := range s.bound.h {
				for _, x := range s.bound.at(int64(p)) {
					if x.r != nil {
						t.Fatalf("a live entry of %s after every request finished", x.r.Req.ID)
					}
				}
			}
		})
	}
}

func (s *VLLM) liveEntry(t *testing.T) *boundEntry {
	for p := range s.bound.h {
		bk := s.bound.at(int64(p))
		for i := range bk {
			if bk[i].r != nil {
				return &bk[i]
			}
		}
	}
	t.Fatal("no live entry")
	return nil
}

// TestRing checks the packed buckets against a slice per bucket: adds
// that grow the room, drops that swap the last entry in, and a clone.
func TestRing(t *testing.T) {
	const B = 4
	g := newRing(B)
	want := make([][]boundEntry, B)
	states := make([]*request.State, 64)
	for i := range states {
		states[i] = &request.State{}
	}
	for i := range 200 {
		p := int64(i*7%5) % B
		if i%3 == 2 && len(want[p]) > 0 {
			// A drop takes a stale entry.
			k := i % len(want[p])
			last := len(want[p]) - 1
			want[p][k] = want[p][last]
			want[p] = want[p][:last]
			if x := &g.at(p)[k]; x.r != nil {
				g.stale(p, x)
			}
			g.drop(p, k)
		} else if i%5 == 4 && len(want[p]) > 0 && want[p][i%len(want[p])].r != nil {
			k := i % len(want[p])
			want[p][k].r = nil
			g.stale(p, &g.at(p)[k])
		} else {
			x := boundEntry{r: states[i%64], anon: int32(i), ids: int32(i % 3)}
			want[p] = append(want[p], x)
			g.add(p, x)
		}
		for q := range want {
			if got := g.at(int64(q)); fmt.Sprint(got) != fmt.Sprint(want[q]) {
				t.Fatalf("after %d operations bucket %d is %v, want %v", i+1, q, got, want[q])
			}
			slow := int32(0)
			for _, x := range want[q] {
				if x.r == nil || x.ids > 0 {
					slow++
				}
			}
			if h := g.h[q]; h.n != int32(len(want[q])) || h.slow != slow {
				t.Fatalf("after %d operations bucket %d's head says %d entries, %d stale or keyed; want %d, %d", i+1, q, h.n, h.slow, len(want[q]), slow)
			}
		}
	}
	if g.stride < 8 {
		t.Fatalf("stride %d: the room never grew", g.stride)
	}
	c := g.clone(&request.Clone{})
	for q := range want {
		got := c.at(int64(q))
		if len(got) != len(want[q]) {
			t.Fatalf("clone: bucket %d has %d entries, want %d", q, len(got), len(want[q]))
		}
		for i, x := range got {
			if x.r == want[q][i].r || x.anon != want[q][i].anon || x.ids != want[q][i].ids {
				t.Fatalf("clone: bucket %d entry %d is %+v, want a copy of %+v", q, i, x, want[q][i])
			}
		}
	}
}

// testRequest is the i-th of a set of requests of growing sizes (prompts
// 20 + 7i tokens, answers 30 + 11i), reset and ready to enqueue.
func testRequest(i int) *request.State {
	r := &request.State{}
	r.Reset()
	r.Req.ID = fmt.Sprintf("r%d", i)
	r.Req.InputTokens = int32(20 + 7*i)
	r.Req.OutputTokens = int32(30 + 11*i)
	return r
}
