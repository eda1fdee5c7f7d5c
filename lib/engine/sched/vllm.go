package sched

import (
	"fmt"
	"unsafe"

	"github.com/blis-sim/blis/lib/engine/internal/minheap"
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

// Config is what VLLM needs of a replica's engine settings. (Fields read
// while forming every step first: see VLLM's layout.)
type Config struct {
	MaxNumBatchedTokens  int32   // token budget per step
	LongPrefillThreshold int32   // max prefill chunk per request per step (0 = off)
	MaxNumSeqs           int     // running requests
	Alpha2               float64 // µs per streamed output token (latency.Alpha.PerOutputToken)
	Checks               bool    // check invariants while forming steps
	// Async is vLLM's async scheduling (default since vLLM 0.14): step n+1
	// is formed while step n executes, so a request reaching the waiting
	// queue during step n is first considered for step n+2.
	Async bool
	// Sends records the progress of prefill-only requests (P/D transfers
	// that overlap the prefill: granularity chunk or stream) for the
	// cluster to read with TakeSends.
	Sends bool
	// Window is the model's sliding attention window in tokens
	// (latency.WindowOf; window.go); 0: none.
	Window int32
	// Spec is speculative decoding (spec.go); nil: one token per decode step.
	Spec *Spec
	// LoRA is the replica's adapters (lora.go); nil: none.
	LoRA *LoRA
	// Hybrid is vLLM's hybrid KV cache manager's sliding-window groups
	// (hybrid.go); nil: every block holds every layer.
	Hybrid *Hybrid
}

// Send is a prefill-only request's progress on a prefill replica: admitted
// into a step (End is row.Null), a chunk computed from Start to End, or
// preempted (both row.Null).
type Send struct {
	R          *request.State
	Start, End int64
}

// VLLM is vLLM v1's Scheduler.schedule: running requests first (decodes,
// then prefill chunks), then admissions from the waiting queue, under the
// token budget and max_num_seqs, with recompute preemption of the newest
// running request when KV blocks run out.
//
// Decoding requests are not touched on every step: a request that finished
// its prefill at step s0 with c0 tokens in KV has, after step s, generated
// gen0+(s-s0) tokens. Its finish and its next KV block boundary are entries
// in step-indexed structures, and the batch's decode aggregates are kept as
// sums, so a step costs O(requests that change), not O(requests running).
//
// The fields are laid out by when they are read: those that forming,
// completing and leaping a step read first, packed in few cache lines (at
// 1,000 replicas a replica's scheduler is cold at each of its events, and
// every line it touches is a miss), then those of rarer paths.
type VLLM struct {
	cfg       Config
	B         int32 // block size (constant: kept out of the interface calls)
	perDec    int32 // tokens each decoding request takes from the step's budget (1 + drafts when it speculates)
	kv        kv.Store
	step      int64  // index of the next (or executing) step
	formedTo  int64  // the last step formed (its blocks allocated): step, or step−1 between steps
	leapMask  uint64 // in a span (Span), the buckets with entries (block size ≤ 64)
	nDecode   int
	decA      int64 // Σ (c0 - s0) over decoding requests: DecodeCtx = decA + nDecode·step
	lastStart int64 // start of the last step formed

	lastEnd   int64 // end of the last step completed
	nrun      int
	used      int32 // tokens scheduled in the current step
	preempted int32 // preemptions while forming the current step
	// Async: requests that reached the queue, in order, not yet seen by
	// the scheduler: a step is formed when the previous one starts, so
	// only those enqueued by then are in it (pending[pendHead:]).
	pendHead int
	pending  []*request.State
	enqSeq   int64

	finishH finishHeap
	// Speculative decoding (nil: off).
	spec *specState
	// Tiered KV (nil: GPU only) and the requests loading from it (below).
	tiers *kv.Tiers
	// LoRA adapters (nil: none).
	lora *loraState

	// bound's bucket p holds the decoding requests that need a new KV block
	// on every step ≡ p (mod block size): a boundary recurs exactly every
	// block_size decode steps, so a ring of buckets replaces a heap.
	bound ring
	// Sliding-window sums (window.go; nil: the model has no window).
	win *window

	waiting waitQueue
	sched   []*request.State
	// Sliding-window KV groups (hybrid.go; nil: none).
	hy *hybrid

	prefilling []*request.State // running requests still in prefill, admission order
	loading    []*request.State
	err        error

	order Order
	// hold stops admissions of new prompts (a prefill replica whose
	// outgoing KV transfers are backed up).
	hold     bool
	runHead  *request.State
	runTail  *request.State
	keys     *request.Keyer
	preSeq   int64
	preempts int64

	victim Victim
	// onPreempt, when set, hears every preemption (decision traces).
	onPreempt func(r *request.State)
	scratch   []*request.State
	// anonSink takes anonymous blocks for no request in particular
	// (takeAnon); only the store's counts and queue matter.
	anonSink kv.Handle
	per      []int32 // scratch: blocks per lower tier of a load
	// sends since the last TakeSends (Config.Sends).
	sends []Send
}

// TakeSends returns the prefill progress recorded since the last call
// (Config.Sends); the slice is reused by the next step.
func (s *VLLM) TakeSends() []Send {
	x := s.sends
	s.sends = s.sends[:0]
	return x
}

// NewVLLM returns an empty scheduler over store; keys derives prefix-cache
// keys at the store's block size. order and victim may be nil (vLLM's own).
func NewVLLM(cfg Config, store kv.Store, keys *request.Keyer, order Order, victim Victim) *VLLM {
	s := &VLLM{cfg: cfg, kv: store, B: store.BlockSize(), keys: keys, order: order, victim: victim,
		bound: newRing(store.BlockSize()), waiting: waitQueue{custom: order != nil}, perDec: 1}
	if cfg.Spec != nil {
		s.spec = newSpecState(cfg.Spec)
	}
	if cfg.LoRA != nil {
		s.lora = newLoRAState(cfg.LoRA)
	}
	if cfg.Window > 0 {
		s.win = &window{w: int64(cfg.Window)}
	}
	if cfg.Hybrid != nil {
		s.hy = newHybrid(cfg.Hybrid, s.B)
	}
	return s
}

// decodeTokens is the budget the decoding requests take in the step.
func (s *VLLM) decodeTokens() int32 { return int32(s.nDecode) * s.perDec }

// SkipFailed enables the failed-admission shortcut; a test turns it off to
// check that it never changes a result.
var SkipFailed = true

func (s *VLLM) KV() kv.Store       { return s.kv }
func (s *VLLM) Waiting() int       { return s.waiting.len() + len(s.pending) - s.pendHead + len(s.loading) }
func (s *VLLM) Running() int       { return s.nrun }
func (s *VLLM) StepIndex() int64   { return s.step }
func (s *VLLM) Preempted() int32   { return s.preempted }
func (s *VLLM) Preemptions() int64 { return s.preempts }
func (s *VLLM) HasWork() bool {
	return s.nrun > 0 || s.waiting.len() > 0 || s.pendHead < len(s.pending)
}
func (s *VLLM) blocksFor(n int32) int32 {
	return (n + s.B - 1) / s.B
}

// Load implements Scheduler.
func (s *VLLM) Load() Load {
	return Load{Waiting: s.Waiting(), Running: s.nrun, KVUsed: s.kv.Used(), KVTotal: s.kv.Total()}
}

// Enqueue implements Scheduler.
func (s *VLLM) Enqueue(r *request.State) {
	r.Phase = request.Waiting
	s.enqSeq++
	r.Order = s.enqSeq
	if s.lora != nil {
		r.LoRA = s.loraOf(r)
	}
	if s.cfg.Async {
		s.pending = append(s.pending, r)
		return
	}
	s.waiting.push(r)
}

// release moves the pending requests that reached the queue before cutoff
// (or at it, when inclusive) into the waiting queue (async scheduling).
func (s *VLLM) release(cutoff int64, inclusive bool) {
	for s.pendHead < len(s.pending) {
		if e := s.pending[s.pendHead].Enqueued; e > cutoff || e == cutoff && !inclusive {
			break
		}
		s.waiting.push(s.pending[s.pendHead])
		s.pending[s.pendHead] = nil
		s.pendHead++
	}
	if s.pendHead == len(s.pending) {
		s.pending, s.pendHead = s.pending[:0], 0
	} else if s.pendHead > 64 && s.pendHead > len(s.pending)/2 {
		n := copy(s.pending, s.pending[s.pendHead:])
		clear(s.pending[n:])
		s.pending, s.pendHead = s.pending[:n], 0
	}
}

// Progress implements Scheduler.
func (s *VLLM) Progress(r *request.State) int32 {
	if r.Decoding {
		if x := s.entry(r); x != nil {
			r.KV.Anon = s.bound.anon(s.bucketOf(r), x)
		}
		return r.Gen0 + s.decoded(r)
	}
	return r.Generated
}

func (s *VLLM) runAppend(r *request.State) {
	r.RPrev, r.RNext = s.runTail, nil
	if s.runTail != nil {
		s.runTail.RNext = r
	} else {
		s.runHead = r
	}
	s.runTail = r
	s.nrun++
}

func (s *VLLM) runRemove(r *request.State) {
	if r.RPrev != nil {
		r.RPrev.RNext = r.RNext
	} else {
		s.runHead = r.RNext
	}
	if r.RNext != nil {
		r.RNext.RPrev = r.RPrev
	} else {
		s.runTail = r.RPrev
	}
	r.RPrev, r.RNext = nil, nil
	s.nrun--
	if s.lora != nil && r.LoRA != 0 {
		s.loraDrop(r)
	}
}

func (s *VLLM) removePrefilling(r *request.State) {
	for i, x := range s.prefilling {
		if x == r {
			copy(s.prefilling[i:], s.prefilling[i+1:])
			s.prefilling[len(s.prefilling)-1] = nil
			s.prefilling = s.prefilling[:len(s.prefilling)-1]
			return
		}
	}
}

// stopDecoding takes a decoding request out of the implicit-progress
// aggregates, registering the answer blocks it filled so far.
func (s *VLLM) stopDecoding(r *request.State, kvTokens int32) {
	if s.spec == nil {
		s.unbind(r) // first: its KV handle is brought up to date
	}
	s.registerHeld(r, kvTokens)
	s.nDecode--
	if s.lora != nil && r.LoRA != 0 {
		s.lora.dec -= s.lora.cfg.FLOPs[r.LoRA-1]
	}
	if s.spec != nil {
		s.specStop(r)
	} else {
		s.decA -= int64(r.C0) - r.S0
		if s.win != nil {
			s.win.stop(r)
		}
	}
	r.Decoding = false
}

// leave takes a running request off this replica: its KV is freed and
// stale step entries are disowned (epoch).
func (s *VLLM) leave(r *request.State) {
	if r.Decoding {
		if s.spec == nil {
			s.finishH.forget(r)
		}
		s.stopDecoding(r, r.C0+s.decoded(r))
	} else {
		s.removePrefilling(r)
	}
	if r.Chunk > 0 {
		// Scheduled in the step being formed: give its budget back.
		s.used -= r.Chunk
	}
	s.kv.Expose(&r.KV, r.Keys) // it may look its own keys up again
	s.kv.Release(&r.KV)
	r.Computed, r.NReg, r.Chunk = 0, 0, 0
	r.Epoch++
	s.runRemove(r)
}

// preempt evicts r by recompute: its KV is freed and it goes back to the
// front of the waiting queue, keeping the tokens it has generated.
func (s *VLLM) preempt(r *request.State) {
	if r.Decoding {
		r.Generated = r.Gen0 + s.decoded(r)
	}
	s.leave(r)
	if s.onPreempt != nil {
		s.onPreempt(r)
	}
	if s.cfg.Sends && r.PrefillOnly {
		s.sends = append(s.sends, Send{R: r, Start: row.Null, End: row.Null})
	}
	r.Preemptions++
	s.preempted++
	s.preempts++
	s.preSeq++
	r.Order = -s.preSeq
	r.Phase = request.Waiting
	s.waiting.push(r)
}

// SetPreemptHook makes f hear every preemption, with the victim (nil: none).
func (s *VLLM) SetPreemptHook(f func(r *request.State)) { s.onPreempt = f }

// SetPolicies implements Scheduler. The waiting queue's shape follows
// whether there is an Order, so a replacement keeps that (a fork's copy of
// the same stage always does).
func (s *VLLM) SetPolicies(order Order, victim Victim) {
	if (order != nil) == s.waiting.custom {
		s.order = order
	}
	s.victim = victim
}

// chooseVictim is the request to preempt: the Victim policy's choice, or
// vLLM's: the lowest priority, the newest among equals (Scheduler.schedule
// under the priority policy takes max(running, key=(priority, arrival))
// with vLLM's smaller-first priorities; under fcfs every priority is 0 and
// this is the newest running request, running.pop()).
func (s *VLLM) chooseVictim() *request.State {
	if s.victim == nil {
		v := s.runTail
		for r := v; r != nil; r = r.RPrev {
			if r.Prio < v.Prio {
				v = r
			}
		}
		return v
	}
	s.scratch = s.scratch[:0]
	for r := s.runHead; r != nil; r = r.RNext {
		s.scratch = append(s.scratch, r)
	}
	return s.victim.Choose(s.scratch)
}

// reserve makes n free blocks available for r by preempting running
// requests; false when r itself had to be preempted.
func (s *VLLM) reserve(r *request.State, n int32) bool {
	for s.kv.Free() < n {
		victim := s.chooseVictim()
		s.preempt(victim)
		if victim == r {
			return false
		}
	}
	return true
}

// registerHeld records the full blocks r holds in the prefix cache before
// they are released (generated blocks named by a dependent, see Keyer).
func (s *VLLM) registerHeld(r *request.State, kvTokens int32) {
	to := min(int(kvTokens/s.B), len(r.Keys), len(r.KV.IDs))
	if to > int(r.NReg) {
		s.kv.Register(&r.KV, r.Keys, int(r.NReg), to)
		r.NReg = int32(to)
	}
}

// Form implements Scheduler, following vLLM v1's Scheduler.schedule.
func (s *VLLM) Form(now int64, b *latency.Batch) bool {
	step := s.step
	s.formedTo = step
	s.preempted = 0
	s.used = 0
	s.sched = s.sched[:0]
	B := s.B
	if s.tiers != nil {
		s.tiers.SetNow(now, 0)
		if len(s.loading) > 0 {
			s.Wake(now)
		}
	}
	if s.cfg.Async {
		// Running back to back, this step was formed as the previous one
		// was launched: it sees the requests enqueued before then (one
		// arriving at that very instant comes after: the engine reacts to
		// its outputs before any client can). After an idle spell it is
		// formed now, with everything that has arrived.
		if s.lastEnd == now && s.lastStart < now {
			s.release(s.lastStart, false)
		} else {
			s.release(now, true)
		}
	}

	// Decoding requests that cross a block boundary this step need a block.
	if s.spec != nil {
		s.specDecide()
		s.specBlocks()
	}
	p := step % int64(B)
	if n := s.bound.h[p].n; n > 0 && s.kv.Free() >= n {
		// A block for each without preempting anyone: taken as
		// advanceBlocks takes them, anonymous ones at once.
		_, taken := s.allocBucket(p, s.kv.AnonHead(), 0)
		s.kv.TakeAnon(taken)
	} else if n > 0 {
		for i := 0; i < int(s.bound.h[p].n); {
			// (reserve may preempt requests of this bucket: their
			// entries go stale in place; none moves)
			r := s.bound.at(p)[i].r
			if r == nil || !s.reserve(r, 1) {
				s.bound.drop(p, i)
				continue
			}
			x := &s.bound.at(p)[i]
			r.KV.Anon = s.bound.anon(p, x)
			s.kv.Alloc(&r.KV, 1, min(x.ids, 1))
			s.bound.bind(p, x, r)
			i++
		}
	}

	// Running requests still in prefill get their next chunk.
	budget := s.cfg.MaxNumBatchedTokens
	thr := s.cfg.LongPrefillThreshold
	for i := 0; i < len(s.prefilling); i++ {
		left := budget - s.decodeTokens() - s.used
		if left <= 0 {
			break
		}
		r := s.prefilling[i]
		n := r.NumTokens() - r.Computed
		if thr > 0 && n > thr {
			n = thr
		}
		if n > left {
			n = left
		}
		need := s.blocksFor(r.Computed+n) - r.KV.Blocks()
		var slide int32
		if s.hy != nil {
			slide = s.slideTo(r, n)
		}
		if need > 0 || slide > 0 {
			if !s.reserve(r, max(need, 0)+slide) {
				break
			}
			if i >= len(s.prefilling) || s.prefilling[i] != r {
				// A Victim policy, or a lower priority, preempted an
				// older prefill: r moved up.
				i = indexOf(s.prefilling, r)
			}
			if slide > 0 {
				s.kv.Slide(&r.KV, slide)
			}
			if need > 0 {
				s.kv.Alloc(&r.KV, need, r.IDBlocks(need))
			}
		}
		r.Chunk = n
		s.used += n
		s.sched = append(s.sched, r)
	}

	s.admit(now, budget)
	if len(s.sched) == 0 && s.nDecode == 0 && s.pendHead < len(s.pending) {
		// Nothing to run: an idle engine schedules again at once and sees
		// every request that has arrived.
		s.release(now, true)
		s.admit(now, budget)
	}
	if s.preempted > 0 {
		// A Victim policy, or a low priority, may have preempted requests
		// scheduled earlier in this step (under fcfs vLLM's choice never
		// does, and this finds nothing to drop).
		k := 0
		for _, r := range s.sched {
			if r.Chunk > 0 {
				s.sched[k] = r
				k++
			}
		}
		clear(s.sched[k:])
		s.sched = s.sched[:k]
	}
	if len(s.sched) == 0 && s.nDecode == 0 {
		return false
	}
	*b = latency.Batch{PrefillSeqs: len(s.sched), PrefillTokens: int64(s.used), DecodeSeqs: s.nDecode}
	for _, r := range s.sched {
		ctx, n := int64(r.Computed), int64(r.Chunk)
		b.PrefillCtx += ctx
		b.PrefillAttn += n * (ctx + (n+1)/2)
		if r.Req.NumImages > 0 && r.FirstSched == now {
			b.PrefillImages += int(r.Req.NumImages) // encoded once, with the first chunk
		}
	}
	// A decoding request's KV after step k of its decode is c0+k.
	b.DecodeCtx = s.decA + int64(s.nDecode)*step
	if s.spec != nil {
		b.DecodeCtx = s.specCtx()
		if s.spec.on && s.nDecode > 0 {
			b.Draft = s.spec.cfg.K
		}
	}
	if s.win != nil {
		// Under speculative decoding no decoder is counted here (specStart
		// keeps its own context sum), so DecodeCtxW stays 0 and the model
		// takes the decodes at the batch's mean: docs/latency.md, "Sliding
		// windows". The prefill sums are exact either way.
		s.win.fill(b, s.sched, step)
	}
	if s.lora != nil {
		s.loraBatch(b)
	}
	s.lastStart = now
	return true
}

// admit takes waiting requests into the step being formed (vLLM v1's
// second phase): while running < max_num_seqs and budget remains, unless
// the step had to preempt.
func (s *VLLM) admit(now int64, budget int32) {
	B, thr := s.B, s.cfg.LongPrefillThreshold
	if s.order != nil && s.preempted == 0 && s.waiting.len() > 0 && s.nrun < s.cfg.MaxNumSeqs {
		s.order.Sort(now, s.waiting.h)
	}
	for s.preempted == 0 && s.waiting.len() > 0 && s.nrun < s.cfg.MaxNumSeqs {
		left := budget - s.decodeTokens() - s.used
		if left <= 0 {
			break
		}
		r := s.waiting.peek()
		if s.lora != nil && r.LoRA != 0 && !s.loraFits(r) {
			// vLLM skips it and takes the requests behind it.
			s.lora.skipped = append(s.lora.skipped, s.waiting.pop())
			continue
		}
		if SkipFailed && r.Failed && s.failedStill(r, left) {
			break
		}
		s.keys.Ensure(r)
		hits := 0
		if r.Computed == 0 && len(r.Keys) > 0 {
			// Lookup, Alloc and (when the step ends) Register touch
			// these: let the misses overlap.
			s.kv.Warm(r.Keys)
			// At least one token is always computed (vLLM caps hits at n-1).
			hits = s.kv.Lookup(r.Keys, int((r.NumTokens()-1)/B))
		}
		comp, held := int32(hits)*B, int32(hits)
		if r.KV.Blocks() > 0 {
			// Its KV arrived from a lower tier or a prefill replica.
			// The hand-off rule: not before the KV arrived, or with
			// pipelining (XferReady < XferDone) the point where the rest
			// arrives before the step needs it; without pipelining the
			// prefill replica has freed its blocks.
			if s.cfg.Checks && r.IsPD() && (r.PD.XferReady > now || r.PD.XferReady == r.PD.XferDone && r.PD.XferKV.Blocks() > 0) {
				s.err = fmt.Errorf("request %s scheduled at %d before its KV transfer allowed it (ready %d, arrived %d) or before its prefill replica freed its blocks", r.Req.ID, now, r.PD.XferReady, r.PD.XferDone)
			}
			comp, held = r.Computed, r.KV.Blocks()
		} else if s.hold {
			break
		} else if s.tiers != nil && r.Computed == 0 {
			if lo := s.tiers.Lookup(r.Keys, hits, int((r.NumTokens()-1)/B)); lo > 0 {
				if !s.startLoad(now, r, hits, lo) {
					break
				}
				continue
			}
		}
		n := r.NumTokens() - comp
		if thr > 0 && n > thr {
			n = thr
		}
		if n > left {
			n = left
		}
		need := max(0, s.blocksFor(comp+n)-held)
		var slide int32
		if s.hy != nil {
			// The sliding groups' blocks from the window before comp on,
			// all taken as new: hits there are not looked up (hybrid.go).
			slide = s.hy.groups * slideHeld(comp, n, s.hy.w, B)
			need += slide
		}
		free := s.kv.Free()
		if free < need || (free < need+int32(hits) && free < need+s.kv.HitCost(r.Keys, hits)) {
			x := r.Rare()
			r.Failed, x.FailFree, x.FailLeft, x.FailHits, x.FailEvict = true, free, left, hits, s.kv.Evictions()
			break
		}
		r.Failed = false
		s.waiting.pop()
		r.Holder = false
		if hits > 0 {
			s.kv.Touch(&r.KV, r.Keys, hits)
			r.NReg = int32(hits)
		}
		if slide > 0 {
			s.kv.Slide(&r.KV, slide)
			need -= slide
		}
		s.kv.Alloc(&r.KV, need, r.IDBlocks(need))
		r.Computed = comp
		if r.FirstSched == row.Null {
			r.FirstSched = now
			r.CachedTok = comp
		}
		r.Phase = request.Running
		s.runAppend(r)
		if s.lora != nil && r.LoRA != 0 {
			s.loraTake(r)
		}
		s.prefilling = append(s.prefilling, r)
		r.Chunk = n
		s.used += n
		s.sched = append(s.sched, r)
		if s.cfg.Sends && r.PrefillOnly {
			s.sends = append(s.sends, Send{R: r, Start: now, End: row.Null})
		}
	}
	if s.lora != nil && len(s.lora.skipped) > 0 {
		s.loraRequeue()
	}
}

// Complete implements Scheduler: the chunks of step s.step are added to
// each request's KV at now; a request whose prompt (plus recomputed output)
// is complete samples a token; full prompt blocks are registered in the
// prefix cache; requests with all their tokens finish and free their blocks.
func (s *VLLM) Complete(now int64, done *[]*request.State) {
	s.lastEnd = now
	step := s.step
	B := s.B
	if s.spec != nil {
		s.specAdvance()
	}
	for _, r := range s.sched {
		if r.Chunk == 0 {
			continue // left the replica after being scheduled (cancelled)
		}
		r.Computed += r.Chunk
		r.Chunk = 0
		if s.cfg.Sends && r.PrefillOnly {
			s.sends = append(s.sends, Send{R: r, Start: s.lastStart, End: now})
		}
		if full := r.Computed / B; full > r.NReg && int(r.NReg) < len(r.Keys) {
			if s.tiers != nil {
				s.tiers.SetNow(now, r.Prio)
			}
			to := min(int(full), len(r.Keys))
			s.kv.Register(&r.KV, r.Keys, int(r.NReg), to)
			r.NReg = int32(to)
		}
		if r.Computed < r.NumTokens() {
			continue // more prefill chunks to go
		}
		s.removePrefilling(r)
		if r.Req.OutputTokens == 0 {
			if r.FirstTok == row.Null {
				r.FirstTok = now
			}
			s.finish(now, r, done)
			continue
		}
		if r.PrefillOnly {
			// Disaggregated: the prompt's KV goes to a decode replica,
			// which produces the first token (this replica's is dropped).
			r.PrefillOnly = false
			r.Epoch++
			s.runRemove(r)
			r.Phase = request.Transfer
			*done = append(*done, r)
			continue
		}
		r.Generated++
		if r.FirstTok == row.Null {
			r.FirstTok = now + s.alphaTokens(1)
		}
		if r.Generated >= r.Req.OutputTokens {
			s.finish(now, r, done)
			continue
		}
		if s.lora != nil && r.LoRA != 0 {
			s.lora.dec += s.lora.cfg.FLOPs[r.LoRA-1]
		}
		if s.hy != nil {
			s.slideDecode(r)
		}
		if s.spec != nil {
			s.specStart(r)
			continue
		}
		r.Decoding = true
		r.S0, r.C0, r.Gen0 = step, r.Computed, r.Generated
		s.nDecode++
		s.decA += int64(r.C0) - r.S0
		if s.win != nil {
			s.win.start(r)
		}
		s.finishH.push(step+int64(r.Req.OutputTokens-r.Gen0), r)
		fb := (step + int64(r.KV.Blocks()*B-r.C0+1)) % int64(B)
		s.bound.add(fb, s.bound.entryOf(fb, r))
	}
	if s.spec != nil {
		s.specFinish(now, done)
	}
	for r := s.finishH.popDue(step); r != nil; r = s.finishH.popDue(step) {
		r.Generated = r.Gen0 + int32(step-r.S0)
		s.finish(now, r, done)
	}
	s.step++
}

// finish ends a request that produced its last token at now: its KV is
// released; the client sees the last token after the per-token overhead α2
// of every token it streamed.
func (s *VLLM) finish(now int64, r *request.State, done *[]*request.State) {
	if r.Decoding {
		s.stopDecoding(r, r.C0+r.Generated-r.Gen0)
	}
	s.kv.Release(&r.KV)
	r.Epoch++
	s.runRemove(r)
	r.Finished = now + s.alphaTokens(r.Generated)
	r.Status = row.StatusCompleted
	*done = append(*done, r)
}

func (s *VLLM) alphaTokens(n int32) int64 {
	if s.cfg.Alpha2 == 0 {
		return 0
	}
	return int64(s.cfg.Alpha2*float64(n) + 0.5)
}

// Cancel implements Scheduler.
func (s *VLLM) Cancel(r *request.State) {
	switch r.Phase {
	case request.Waiting:
		if r.Tier != nil && r.Tier.Loading {
			s.loading = remove(s.loading, r)
			r.Tier.Loading = false
		} else if i := indexOf(s.pending[s.pendHead:], r); i >= 0 {
			i += s.pendHead
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
		} else {
			s.waiting.remove(r)
		}
		if r.KV.Blocks() > 0 {
			s.kv.Expose(&r.KV, r.Keys)
			s.kv.Release(&r.KV) // loaded (tier or transfer), not yet running
			r.Computed, r.NReg = 0, 0
		}
		r.Epoch++
	case request.Running:
		s.leave(r)
	}
}

// Check implements Scheduler.
func (s *VLLM) Check(full bool) error {
	if s.cfg.LongPrefillThreshold == 0 {
		// Without a threshold only the newest running request can be left
		// mid-prefill, which is what makes decode-first equal vLLM's order.
		for i := 0; i+1 < len(s.prefilling); i++ {
			if r := s.prefilling[i]; r.Computed+r.Chunk != r.NumTokens() {
				return fmt.Errorf("step %d: request %s left mid-prefill behind a newer one", s.step, r.Req.ID)
			}
		}
	}
	if s.nrun > s.cfg.MaxNumSeqs {
		return fmt.Errorf("step %d: %d running > max_num_seqs %d", s.step, s.nrun, s.cfg.MaxNumSeqs)
	}
	if t := int(s.used) + int(s.decodeTokens()); t > int(s.cfg.MaxNumBatchedTokens) {
		return fmt.Errorf("step %d: %d tokens > max_num_batched_tokens %d", s.step, t, s.cfg.MaxNumBatchedTokens)
	}
	if s.spec != nil {
		if err := s.specCheck(); err != nil {
			return err
		}
	}
	if s.lora != nil {
		if err := s.loraCheck(); err != nil {
			return err
		}
	}
	if s.err != nil {
		return s.err
	}
	if full {
		if err := s.checkBound(); err != nil {
			return err
		}
		if s.hy != nil {
			for r := s.runHead; r != nil; r = r.RNext {
				if err := s.checkSlide(r); err != nil {
					return err
				}
			}
		}
	}
	err := s.kv.QuickCheck()
	if err == nil && full {
		err = s.kv.Check()
	}
	if err == nil && s.tiers != nil && full {
		err = s.tiers.Check()
	}
	return err
}

// Clone implements Scheduler.
func (s *VLLM) Clone(c *request.Clone, store kv.Store, keys *request.Keyer) Scheduler {
	d := *s
	d.kv = store
	d.keys = keys
	d.waiting.h = mapAll(c, s.waiting.h)
	d.pending, d.pendHead = mapAll(c, s.pending[s.pendHead:]), 0
	d.runHead, d.runTail = c.Map(s.runHead), c.Map(s.runTail)
	d.prefilling = mapAll(c, s.prefilling)
	d.sched = mapAll(c, s.sched)
	d.scratch, d.per = nil, nil
	d.sends = nil
	d.loading = mapAll(c, s.loading)
	if s.spec != nil {
		d.spec = s.spec.clone(c)
	}
	if s.lora != nil {
		d.lora = s.lora.clone(c)
	}
	if s.win != nil {
		d.win = s.win.clone(c)
	}
	if s.tiers != nil {
		d.tiers = s.tiers.Clone(store)
		store.SetLower(d.tiers)
	}
	d.finishH = s.finishH.clone(c)
	d.bound = s.bound.clone(c)
	return &d
}

func indexOf(rs []*request.State, r *request.State) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

func mapAll(c *request.Clone, rs []*request.State) []*request.State {
	out := make([]*request.State, len(rs))
	for i, r := range rs {
		out[i] = c.Map(r)
	}
	return out
}

// stepHeap orders steps (speculative decoding's finishes and blocks,
// sliding-window crossings) by step index. Entries carry the request's
// epoch so that a preempted or finished request's stale entries are
// skipped. (The decode finishes of VLLM are a finishHeap.)
type stepEntry struct {
	step  int64
	seq   uint64
	epoch uint32
	r     *request.State
}

func (a *stepEntry) Less(b *stepEntry) bool {
	return a.step < b.step || (a.step == b.step && a.seq < b.seq)
}

type stepHeap struct {
	minheap.Heap[stepEntry, *stepEntry]
	seq uint64
}

// live says whether x is not stale.
func (h *stepHeap) live(x *stepEntry) bool {
	return x.r != nil && x.epoch == x.r.Epoch
}

func (h *stepHeap) push(step int64, r *request.State) {
	h.seq++
	h.Push(stepEntry{step: step, seq: h.seq, epoch: r.Epoch, r: r})
}

// popDue returns the next live entry due at or before step, or nil.
func (h *stepHeap) popDue(step int64) *request.State {
	for h.Len() > 0 && h.S[0].step <= step {
		x := h.Pop()
		if h.live(&x) {
			return x.r
		}
	}
	return nil
}

// firstLive is the step of the earliest live entry (stale ones at the top
// are dropped: popDue would skip them).
func (h *stepHeap) firstLive() (int64, bool) {
	for h.Len() > 0 {
		if h.live(&h.S[0]) {
			return h.S[0].step, true
		}
		h.Pop()
	}
	return 0, false
}

// failedStill reports whether r's failed admission (Rare) would fail again
// with left tokens of budget.
func (s *VLLM) failedStill(r *request.State, left int32) bool {
	x := r.Rare()
	return s.kv.Free() <= x.FailFree && left >= x.FailLeft && s.kv.Evictions() == x.FailEvict && !s.kv.Has(r.Keys, x.FailHits)
}

// Hot is the address and length of the fields forming, completing and
// leaping a step read (the struct's first lines), for a read-ahead.
func (s *VLLM) Hot() (unsafe.Pointer, uintptr) {
	return unsafe.Pointer(s), unsafe.Offsetof(s.victim)
}

// Reach is where the fields Hot covers point that completing a step reads
// first, for a read-ahead once they are in cache: the finish heap's root
// and its children, the KV store's first line, and the block-boundary
// buckets' heads (nil: none).
func (s *VLLM) Reach() (fin unsafe.Pointer, finLen uintptr, store, heads unsafe.Pointer, headsLen uintptr) {
	if n := len(s.finishH.s); n > finRoot {
		fin, finLen = unsafe.Pointer(&s.finishH.s[finRoot]), uintptr(min(n-finRoot, 5))*unsafe.Sizeof(s.finishH.s[0])
	}
	if p, ok := s.kv.(*kv.Paged); ok {
		store = unsafe.Pointer(p)
	}
	if len(s.bound.h) > 0 {
		heads, headsLen = unsafe.Pointer(&s.bound.h[0]), uintptr(len(s.bound.h))*unsafe.Sizeof(s.bound.h[0])
	}
	return fin, finLen, store, heads, headsLen
}

// KVRecords is the number of identified KV blocks its cache has created
// (kv.Paged's Records; 0 for another store), for the cluster's estimate of
// its memory.
func (s *VLLM) KVRecords() int {
	if p, ok := s.kv.(*kv.Paged); ok {
		return p.Records()
	}
	return 0
}

// QueueHead is the KV store's free-queue head (kv.Paged.QueueHead), for a
// read-ahead once the store's first line is in cache (nil: none).
func (s *VLLM) QueueHead() unsafe.Pointer {
	if p, ok := s.kv.(*kv.Paged); ok {
		return p.QueueHead()
	}
	return nil
}
