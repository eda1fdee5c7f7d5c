package sched

import (
	"fmt"
	"testing"

	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/latency"
)

// TestWindowSums runs schedulers with a sliding window to the end, with
// room to spare and with preemptions, and checks every step's windowed
// sums against a count over the requests (prefill pairs position by
// position), and every span's promise: that the ramp's windowed decode
// sum, min(Σ ctx, seqs·(W−1)), is each of the span's steps' own.
func TestWindowSums(t *testing.T) {
	for _, tc := range []struct {
		w      int32
		blocks int32
		thr    int32
		spec   bool // speculative decoding: exact prefill sums, decodes left to the model's mean (DecodeCtxW 0)
	}{
		{1, 4096, 0, false}, {16, 4096, 0, false}, {64, 4096, 24, false}, {64, 40, 0, false}, {150, 60, 0, false}, {5000, 4096, 0, false},
		{64, 4096, 0, true}, {150, 60, 0, true},
	} {
		for _, hybrid := range []bool{false, true} {
			t.Run(fmt.Sprintf("w%d-blocks%d-thr%d-spec%v-hybrid%v", tc.w, tc.blocks, tc.thr, tc.spec, hybrid), func(t *testing.T) {
				const B = 16
				cfg := Config{MaxNumBatchedTokens: 256, MaxNumSeqs: 16, Checks: true, Window: tc.w, LongPrefillThreshold: tc.thr}
				if hybrid {
					// vLLM's hybrid KV cache manager: sliding groups' blocks
					// freed as they leave the window (hybrid.go).
					cfg.Hybrid = &Hybrid{Window: tc.w, Groups: 1}
				}
				if tc.spec {
					cfg.Spec = &Spec{K: 3, Tokens: []int64{3 * SpecQ}}
				}
				s := NewVLLM(cfg, kv.NewPaged(tc.blocks, B), &request.Keyer{Block: B}, nil, nil)
				for i := range 40 {
					r := &request.State{}
					r.Reset()
					r.Req.ID = fmt.Sprintf("r%d", i)
					r.Req.InputTokens = int32(3 + 13*(i%9))
					r.Req.OutputTokens = int32(5 + 29*(i%7))
					s.Enqueue(r)
				}
				w := int64(tc.w)
				var b latency.Batch
				var done []*request.State
				now, spans := int64(0), 0
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
					var pairs, pctx, dctx, dctxW int64
					var ctxs []int64
					for _, r := range s.sched {
						for p := int64(r.Computed); p < int64(r.Computed+r.Chunk); p++ {
							pairs += min(p+1, w)
						}
						pctx += min(int64(r.Computed), w-1)
					}
					for r := s.runHead; r != nil; r = r.RNext {
						if r.Decoding {
							c := int64(r.C0) + s.step - r.S0
							ctxs = append(ctxs, c)
							dctx += c
							dctxW += min(c, w-1)
						}
					}
					if tc.spec {
						if b.PrefillAttnW != pairs || b.PrefillCtxW != pctx || b.DecodeCtxW != 0 {
							t.Fatalf("step %d, speculative: windowed sums %d %d %d, counted %d %d, want DecodeCtxW 0", step,
								b.PrefillAttnW, b.PrefillCtxW, b.DecodeCtxW, pairs, pctx)
						}
						now += 1000
						s.Complete(now, &done)
						continue
					}
					if b.PrefillAttnW != pairs || b.PrefillCtxW != pctx || b.DecodeCtxW != dctxW || b.DecodeCtx != dctx {
						t.Fatalf("step %d: windowed sums %d %d %d (DecodeCtx %d), counted %d %d %d (%d)", step,
							b.PrefillAttnW, b.PrefillCtxW, b.DecodeCtxW, b.DecodeCtx, pairs, pctx, dctxW, dctx)
					}
					if sp, ok := s.Span(); ok {
						spans++
						for k := int64(0); k < sp.Steps; k++ {
							var sum int64
							for _, c := range ctxs {
								sum += min(c+k, w-1)
							}
							if ramp := min(sp.Ctx0+k*int64(sp.Seqs), int64(sp.Seqs)*(w-1)); ramp != sum {
								t.Fatalf("step %d: span of %d steps, its step %d: ramp's windowed sum %d, the requests' %d (contexts %v)", step, sp.Steps, k, ramp, sum, ctxs)
							}
						}
					}
					now += 1000
					s.Complete(now, &done)
				}
				if len(done) != 40 {
					t.Fatalf("%d of 40 requests finished", len(done))
				}
				if s.win.n != 0 || s.win.over != 0 {
					t.Fatalf("window counts %d below, %d past after every request finished", s.win.n, s.win.over)
				}
				if spans == 0 && !tc.spec {
					t.Fatal("no span checked")
				}
			})
		}
	}
}
