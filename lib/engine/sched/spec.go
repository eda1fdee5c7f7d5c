package sched

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/request"
)

// SpecQ is the fixed-point unit of speculative decoding's token clocks:
// 1 token = SpecQ (2^16), so fractional expected tokens per step add up
// exactly, in integers, with no drift between replicas or platforms.
const SpecQ = 1 << 16

// Spec is speculative decoding (docs/latency.md, "Speculative decoding").
// A step speculates unless its running batch reaches DisableBatch or its
// verified tokens would not fit the token budget; then each decoding
// request runs K drafts through the target and gains its class's expected
// accepted length, (1 − α^(K+1)) / (1 − α) tokens (Tokens, in SpecQ
// units); a step that does not speculate gains one token per request.
//
// Progress is deterministic: a class keeps a token clock (Σ over its
// steps of the tokens a request gained), and a request that started
// decoding at clock c0 has generated ⌊(clock − c0)/SpecQ⌋ tokens since.
// This keeps the scheduler's implicit decode progress (a step costs
// O(requests that change)); per-step random acceptance would touch every
// request on every step, and its mean is what TPOT measures.
type Spec struct {
	K            int32   // draft tokens per request per step
	Tokens       []int64 // expected tokens per speculative step per class, SpecQ units; class 0 is the default
	Class        map[string]uint8
	DisableBatch int // running requests at which a step stops speculating (0 = never)
}

// ClassOf is r's acceptance class: by its SLO class, else the default.
func (c *Spec) ClassOf(r *request.State) uint8 {
	if len(c.Class) == 0 || r.Req.SLOClass == "" {
		return 0
	}
	return c.Class[r.Req.SLOClass]
}

// specState is a scheduler's speculative decoding: a token clock, the
// decode aggregates and the due finishes and block boundaries per class
// (a request's progress depends on its class's clock, so each class has
// its own).
type specState struct {
	cfg *Spec
	on  bool // the step formed speculates
	cls []specClass
}

type specClass struct {
	e   int64    // tokens per speculative step, SpecQ units
	clk int64    // token clock, SpecQ units
	n   int      // decoding requests
	ctx int64    // Σ (C0·SpecQ − S0) over them: Σ KV = (ctx + n·clk)/SpecQ
	fin stepHeap // finishes, keyed by clock
	bnd stepHeap // next KV block needed, keyed by clock
}

func newSpecState(c *Spec) *specState {
	st := &specState{cfg: c, cls: make([]specClass, len(c.Tokens))}
	for i, e := range c.Tokens {
		st.cls[i].e = e
	}
	return st
}

// decoded is the tokens r generated since its decode started.
func (s *VLLM) decoded(r *request.State) int32 {
	if s.spec != nil {
		return int32((s.spec.cls[r.SpecC].clk - r.S0) / SpecQ)
	}
	return int32(s.step - 1 - r.S0)
}

// specDecide chooses whether the step being formed speculates: not at or
// above disable_by_batch_size running requests (vLLM), nor when the
// decodes' verified tokens alone would exceed the token budget.
func (s *VLLM) specDecide() {
	sp := s.spec
	k := sp.cfg.K
	sp.on = s.nDecode > 0 && (sp.cfg.DisableBatch == 0 || s.nrun < sp.cfg.DisableBatch) &&
		int64(s.nDecode)*int64(k+1) <= int64(s.cfg.MaxNumBatchedTokens)
	s.perDec = 1
	if sp.on {
		s.perDec = k + 1
	}
}

// specBlocks gives each decoding request whose KV grew past its blocks the
// blocks this step needs: its KV, the token it runs and K draft slots
// (vLLM's lookahead slots), reserved whether or not the step speculates.
func (s *VLLM) specBlocks() {
	k := s.spec.cfg.K
	for c := range s.spec.cls {
		cl := &s.spec.cls[c]
		for cl.bnd.Len() > 0 && cl.bnd.S[0].step <= cl.clk {
			x := cl.bnd.Pop()
			r := x.r
			if x.epoch != r.Epoch {
				continue
			}
			want := r.C0 + int32((cl.clk-r.S0)/SpecQ) + 1 + k
			if need := s.blocksFor(want) - r.KV.Blocks(); need > 0 {
				if !s.reserve(r, need) {
					continue
				}
				s.kv.Alloc(&r.KV, need, r.IDBlocks(need))
			}
			s.specBound(cl, r)
		}
	}
}

// specBound schedules r's next block: at the first clock where its KV,
// token and drafts exceed its blocks.
func (s *VLLM) specBound(cl *specClass, r *request.State) {
	room := int64(r.KV.Blocks())*int64(s.B) - int64(r.C0) - int64(s.spec.cfg.K)
	cl.bnd.push(r.S0+room*SpecQ, r)
}

// specCtx is Σ over decoding requests of the context their first query
// token attends over (KV so far plus itself).
func (s *VLLM) specCtx() int64 {
	var q int64
	for c := range s.spec.cls {
		cl := &s.spec.cls[c]
		if cl.n > 0 {
			q += cl.ctx + int64(cl.n)*cl.clk
		}
	}
	return q/SpecQ + int64(s.nDecode)
}

// specAdvance moves the clocks of the classes that decoded in the step
// ending: its expected accepted length when it speculated, else 1.
func (s *VLLM) specAdvance() {
	for c := range s.spec.cls {
		cl := &s.spec.cls[c]
		if cl.n == 0 {
			continue
		}
		if s.spec.on {
			cl.clk += cl.e
		} else {
			cl.clk += SpecQ
		}
	}
}

// specStart makes r, its prompt done and first token sampled, a decoding
// request of its class.
func (s *VLLM) specStart(r *request.State) {
	c := s.spec.cfg.ClassOf(r)
	cl := &s.spec.cls[c]
	r.SpecC = c
	r.Decoding = true
	r.S0, r.C0, r.Gen0 = cl.clk, r.Computed, r.Generated
	s.nDecode++
	cl.n++
	cl.ctx += int64(r.C0)*SpecQ - r.S0
	cl.fin.push(r.S0+int64(r.Req.OutputTokens-r.Gen0)*SpecQ, r)
	s.specBound(cl, r)
}

// specStop takes a decoding request out of its class's aggregates.
func (s *VLLM) specStop(r *request.State) {
	cl := &s.spec.cls[r.SpecC]
	cl.n--
	cl.ctx -= int64(r.C0)*SpecQ - r.S0
}

// specFinish ends the requests whose last token came in the step ending.
func (s *VLLM) specFinish(now int64, done *[]*request.State) {
	for c := range s.spec.cls {
		cl := &s.spec.cls[c]
		for r := cl.fin.popDue(cl.clk); r != nil; r = cl.fin.popDue(cl.clk) {
			r.Generated = r.Req.OutputTokens
			s.finish(now, r, done)
		}
	}
}

// specCheck verifies the class aggregates against the running requests.
func (s *VLLM) specCheck() error {
	n := make([]int, len(s.spec.cls))
	for r := s.runHead; r != nil; r = r.RNext {
		if r.Decoding {
			n[r.SpecC]++
			if g := r.Gen0 + s.decoded(r); g >= r.Req.OutputTokens {
				return fmt.Errorf("step %d: request %s decoding with %d of %d tokens generated", s.step, r.Req.ID, g, r.Req.OutputTokens)
			}
		}
	}
	for c := range n {
		if n[c] != s.spec.cls[c].n {
			return fmt.Errorf("step %d: speculative class %d counts %d decoding requests, %d running", s.step, c, s.spec.cls[c].n, n[c])
		}
	}
	return nil
}

func (st *specState) clone(c *request.Clone) *specState {
	d := &specState{cfg: st.cfg, on: st.on, cls: make([]specClass, len(st.cls))}
	for i := range st.cls {
		d.cls[i] = st.cls[i]
		d.cls[i].fin = cloneHeap(c, &st.cls[i].fin)
		d.cls[i].bnd = cloneHeap(c, &st.cls[i].bnd)
	}
	return d
}

func cloneHeap(c *request.Clone, h *stepHeap) stepHeap {
	d := stepHeap{seq: h.seq}
	d.S = make([]stepEntry, len(h.S))
	for i, e := range h.S {
		e.r, e.epoch = c.MapEntry(e.r, e.epoch)
		d.S[i] = e
	}
	return d
}
