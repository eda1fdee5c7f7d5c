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
// decoding request has one live block-boundary entry mirroring its State
// (checkBound), that stale entries are marked, and that a wrong mirror is
// caught.
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
				r := &request.State{}
				r.Reset()
				r.Req.ID = fmt.Sprintf("r%d", i)
				r.Req.InputTokens = int32(20 + 7*i)
				r.Req.OutputTokens = int32(30 + 11*i)
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
				for _, bk := range s.bound {
					for _, x := range bk {
						if x.r != nil && !x.r.Decoding {
							t.Fatalf("step %d: live entry of %s, which is not decoding", step, x.r.Req.ID)
						}
					}
				}
				if !corrupted && s.nDecode > 0 {
					x := s.liveEntry(t)
					x.anon++
					if err := s.checkBound(); err == nil || !strings.Contains(err.Error(), "block-boundary entry says") {
						t.Fatalf("a wrong mirror passed the check: %v", err)
					}
					x.anon--
					corrupted = true
				}
			}
			if len(done) != len(rs) {
				t.Fatalf("%d of %d requests finished", len(done), len(rs))
			}
			if tc.blocks == 40 && s.Preemptions() == 0 {
				t.Fatal("the tight case preempted nobody")
			}
			for _, bk := range s.bound {
				for _, x := range bk {
					if x.r != nil {
						t.Fatalf("a live entry of %s after every request finished", x.r.Req.ID)
					}
				}
			}
		})
	}
}

func (s *VLLM) liveEntry(t *testing.T) *boundEntry {
	for _, bk := range s.bound {
		for i := range bk {
			if bk[i].r != nil {
				return &bk[i]
			}
		}
	}
	t.Fatal("no live entry")
	return nil
}
