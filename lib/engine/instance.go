package engine

import (
	"fmt"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// instance is one replica: a vLLM-v1 scheduler over a paged KV cache.
//
// Decoding requests are not touched on every step: a request that finished
// its prefill at step s0 with c0 tokens in KV has, after step s, generated
// gen0+(s-s0) tokens. Its finish and its next KV block boundary are entries
// in step-indexed heaps, and the batch's decode aggregates are kept as sums,
// so a step costs O(requests that change), not O(requests running).
type instance struct {
	id int32
	kv *kvCache

	waiting    waitQueue
	runHead    *reqState
	runTail    *reqState
	nrun       int
	prefilling []*reqState // running requests still in prefill, admission order
	nDecode    int
	decA       int64 // Σ (c0 - s0) over decoding requests: DecodeCtx = decA + nDecode·step
	finishH    stepHeap
	// bound[p] holds the decoding requests that need a new KV block on every
	// step ≡ p (mod block size): a boundary recurs exactly every block_size
	// decode steps, so a ring of buckets replaces a heap.
	bound [][]boundEntry

	step         int64 // index of the next step
	busy         bool  // a step is executing
	startPending bool  // a step-start event is queued
	sched        []*reqState
	used         int32 // tokens scheduled in the current step
	preempted    int32 // preemptions while forming the current step
	stepStart    int64
	batch        latency.Batch

	inflight int // routed here, in the alpha delay

	// counters
	steps     int64
	busyUS    int64
	preemptsN int64
}

type boundEntry struct {
	r     *reqState
	epoch uint32
}

func newInstance(id int32, blocks int32, blockSize int32) *instance {
	return &instance{id: id, kv: newKVCache(blocks, blockSize), bound: make([][]boundEntry, blockSize)}
}

func (in *instance) runAppend(r *reqState) {
	r.rprev, r.rnext = in.runTail, nil
	if in.runTail != nil {
		in.runTail.rnext = r
	} else {
		in.runHead = r
	}
	in.runTail = r
	in.nrun++
}

func (in *instance) runRemove(r *reqState) {
	if r.rprev != nil {
		r.rprev.rnext = r.rnext
	} else {
		in.runHead = r.rnext
	}
	if r.rnext != nil {
		r.rnext.rprev = r.rprev
	} else {
		in.runTail = r.rprev
	}
	r.rprev, r.rnext = nil, nil
	in.nrun--
}

func (in *instance) removePrefilling(r *reqState) {
	for i, x := range in.prefilling {
		if x == r {
			copy(in.prefilling[i:], in.prefilling[i+1:])
			in.prefilling[len(in.prefilling)-1] = nil
			in.prefilling = in.prefilling[:len(in.prefilling)-1]
			return
		}
	}
}

func (in *instance) blocksFor(tokens int32) int32 {
	return (tokens + in.kv.blockSize - 1) / in.kv.blockSize
}

func (in *instance) hasWork() bool { return in.nrun > 0 || in.waiting.len() > 0 }

// preempt evicts r by recompute: its KV is freed and it goes back to the
// front of the waiting queue, keeping the tokens it has generated.
func (s *sim) preempt(in *instance, r *reqState) {
	if r.decoding {
		r.generated = r.gen0 + int32(in.step-1-r.s0)
		s.registerHeld(in, r, r.c0+int32(in.step-1-r.s0))
		in.nDecode--
		in.decA -= int64(r.c0) - r.s0
		r.decoding = false
	} else {
		in.removePrefilling(r)
	}
	in.kv.release(r)
	r.computed, r.nreg, r.chunk = 0, 0, 0
	r.epoch++
	in.runRemove(r)
	r.preemptions++
	in.preempted++
	in.preemptsN++
	s.preemptSeq++
	r.order = -s.preemptSeq
	r.state = stWaiting
	in.waiting.push(r)
}

// reserve makes n free blocks available for r by preempting the newest
// running requests; false when r itself had to be preempted.
func (s *sim) reserve(in *instance, r *reqState, n int32) bool {
	for in.kv.free < n {
		victim := in.runTail
		s.preempt(in, victim)
		if victim == r {
			return false
		}
	}
	return true
}

func (s *sim) ensureKeys(r *reqState) {
	if r.keysOK {
		return
	}
	r.keysOK = true
	if !s.cfg.Engine.PrefixCaching {
		return
	}
	B := int32(s.cfg.Engine.BlockSize)
	r.keys = engineKeys(r.keys, r.req.PrefixHashes, r.req.InputTokens, s.prefixBlock, B)
	if len(r.keys) == 0 || int32(len(r.keys)) != r.req.InputTokens/B {
		return
	}
	// The blocks this request's answer fills have no hashes of their own.
	// A later request of the same conversation (a dependent whose prompt
	// starts with this whole prompt) names them: its keys past this prompt
	// cover this prompt's tail and the answer, so use them, as vLLM would
	// hash the generated blocks. Tool calls in between are looked through.
	full := (r.req.InputTokens + max(r.req.OutputTokens, 1) - 1) / B
	if full <= int32(len(r.keys)) {
		return
	}
	s.kids = append(s.kids[:0], r.children...)
	for i := 0; i < len(s.kids) && i < 64; i++ {
		c := s.kids[i]
		if c.req.Kind == trace.KindTool {
			s.kids = append(s.kids, c.children...)
			continue
		}
		if len(c.req.PrefixHashes) == 0 {
			continue
		}
		s.scratch = engineKeys(s.scratch, c.req.PrefixHashes, c.req.InputTokens, s.prefixBlock, B)
		if len(s.scratch) <= len(r.keys) || !equalKeys(s.scratch[:len(r.keys)], r.keys) {
			continue
		}
		r.keys = append(r.keys, s.scratch[len(r.keys):min(int32(len(s.scratch)), full)]...)
		return
	}
}

func equalKeys(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// registerHeld records the full blocks r holds in the prefix cache before
// they are released (generated blocks named by a dependent, see ensureKeys).
func (s *sim) registerHeld(in *instance, r *reqState, kvTokens int32) {
	to := min(int(kvTokens/in.kv.blockSize), len(r.keys), len(r.ids))
	if to > int(r.nreg) {
		in.kv.register(r, r.keys, int(r.nreg), to)
		r.nreg = int32(to)
	}
}

// skipFailed enables the failed-admission shortcut; a test turns it off to
// check that it never changes a result.
var skipFailed = true

// startStep forms and launches step in.step at s.now, following vLLM v1's
// Scheduler.schedule: running requests first, then admissions.
func (s *sim) startStep(in *instance) {
	e := &s.cfg.Engine
	step := in.step
	in.preempted = 0
	in.used = 0
	in.sched = in.sched[:0]
	B := in.kv.blockSize

	// Decoding requests that cross a block boundary this step need a block.
	bucket := &in.bound[step%int64(B)]
	for i := 0; i < len(*bucket); {
		x := (*bucket)[i]
		if x.epoch != x.r.epoch || !s.reserve(in, x.r, 1) {
			last := len(*bucket) - 1
			(*bucket)[i] = (*bucket)[last]
			(*bucket)[last] = boundEntry{}
			*bucket = (*bucket)[:last]
			continue
		}
		in.kv.alloc(x.r, 1, x.r.idBlocks(1))
		i++
	}

	// Running requests still in prefill get their next chunk.
	budget := int32(e.MaxNumBatchedTokens)
	for i := 0; i < len(in.prefilling); i++ {
		left := budget - int32(in.nDecode) - in.used
		if left <= 0 {
			break
		}
		r := in.prefilling[i]
		n := r.numTokens() - r.computed
		if e.LongPrefillThreshold > 0 && n > int32(e.LongPrefillThreshold) {
			n = int32(e.LongPrefillThreshold)
		}
		if n > left {
			n = left
		}
		need := in.blocksFor(r.computed+n) - r.nblocks()
		if need > 0 {
			if !s.reserve(in, r, need) {
				break
			}
			in.kv.alloc(r, need, r.idBlocks(need))
		}
		r.chunk = n
		in.used += n
		in.sched = append(in.sched, r)
	}

	// Admissions, unless this step had to preempt.
	for in.preempted == 0 && in.waiting.len() > 0 && in.nrun < e.MaxNumSeqs {
		left := budget - int32(in.nDecode) - in.used
		if left <= 0 {
			break
		}
		r := in.waiting.peek()
		if skipFailed && r.failed && in.kv.free <= r.failFree && left >= r.failLeft && in.kv.evictions == r.failEvict && !in.kv.has(r.keys, r.failHits) {
			break
		}
		s.ensureKeys(r)
		hits := 0
		if r.computed == 0 && len(r.keys) > 0 {
			// At least one token is always computed (vLLM caps hits at n-1).
			hits = in.kv.lookup(r.keys, int((r.numTokens()-1)/B))
		}
		comp := int32(hits) * B
		n := r.numTokens() - comp
		if e.LongPrefillThreshold > 0 && n > int32(e.LongPrefillThreshold) {
			n = int32(e.LongPrefillThreshold)
		}
		if n > left {
			n = left
		}
		need := in.blocksFor(comp+n) - int32(hits)
		if in.kv.free < need || (in.kv.free < need+int32(hits) && in.kv.free < need+in.kv.hitCost(r.keys, hits)) {
			r.failed, r.failFree, r.failLeft, r.failHits, r.failEvict = true, in.kv.free, left, hits, in.kv.evictions
			break
		}
		r.failed = false
		in.waiting.pop()
		if hits > 0 {
			in.kv.touch(r, r.keys, hits)
			r.nreg = int32(hits)
		}
		in.kv.alloc(r, need, r.idBlocks(need))
		r.computed = comp
		if r.firstSched == trace.Null {
			r.firstSched = s.now
			r.cachedTok = comp
		}
		r.state = stRunning
		in.runAppend(r)
		in.prefilling = append(in.prefilling, r)
		r.chunk = n
		in.used += n
		in.sched = append(in.sched, r)
	}

	if len(in.sched) == 0 && in.nDecode == 0 {
		in.busy = false
		return
	}
	b := &in.batch
	*b = latency.Batch{PrefillSeqs: len(in.sched), PrefillTokens: int64(in.used), DecodeSeqs: in.nDecode}
	for _, r := range in.sched {
		ctx, n := int64(r.computed), int64(r.chunk)
		b.PrefillCtx += ctx
		b.PrefillAttn += n * (ctx + (n+1)/2)
	}
	// A decoding request's KV after step k of its decode is c0+k.
	b.DecodeCtx = in.decA + int64(in.nDecode)*step
	dur := s.model.StepTime(b)
	if dur < 1 {
		dur = 1
	}
	in.busy = true
	in.stepStart = s.now
	s.h.push(s.now+dur, evStepEnd, in.id, nil)
	if s.checks && e.LongPrefillThreshold == 0 {
		// Without a threshold only the newest running request can be left
		// mid-prefill, which is what makes decode-first equal vLLM's order.
		for i := 0; i+1 < len(in.prefilling); i++ {
			if r := in.prefilling[i]; r.computed+r.chunk != r.numTokens() {
				s.fail(fmt.Errorf("invariant violated: instance %d step %d: request %s left mid-prefill behind a newer one", in.id, step, r.req.ID))
			}
		}
	}
	if s.checks && in.nrun > e.MaxNumSeqs {
		s.fail(fmt.Errorf("instance %d step %d: %d running > max_num_seqs %d", in.id, step, in.nrun, e.MaxNumSeqs))
	}
	if s.checks && int(in.used)+in.nDecode > e.MaxNumBatchedTokens {
		s.fail(fmt.Errorf("instance %d step %d: %d tokens > max_num_batched_tokens %d", in.id, step, int(in.used)+in.nDecode, e.MaxNumBatchedTokens))
	}
}

// endStep applies step in.step's results at s.now.
func (s *sim) endStep(in *instance) {
	step := in.step
	B := in.kv.blockSize
	for _, r := range in.sched {
		if r.chunk == 0 {
			continue // preempted after being scheduled (cannot happen with newest-first preemption)
		}
		r.computed += r.chunk
		r.chunk = 0
		if full := r.computed / B; full > r.nreg && int(r.nreg) < len(r.keys) {
			to := int(full)
			if to > len(r.keys) {
				to = len(r.keys)
			}
			in.kv.register(r, r.keys, int(r.nreg), to)
			r.nreg = int32(to)
		}
		if r.computed < r.numTokens() {
			continue // more prefill chunks to go
		}
		in.removePrefilling(r)
		if r.req.OutputTokens == 0 {
			if r.firstTok == trace.Null {
				r.firstTok = s.now
			}
			s.finishRun(in, r)
			continue
		}
		r.generated++
		if r.firstTok == trace.Null {
			r.firstTok = s.now + s.alphaTokens(1)
		}
		if r.generated >= r.req.OutputTokens {
			s.finishRun(in, r)
			continue
		}
		r.decoding = true
		r.s0, r.c0, r.gen0 = step, r.computed, r.generated
		in.nDecode++
		in.decA += int64(r.c0) - r.s0
		in.finishH.push(step+int64(r.req.OutputTokens-r.gen0), r)
		fb := step + int64(r.nblocks()*B-r.c0+1)
		in.bound[fb%int64(B)] = append(in.bound[fb%int64(B)], boundEntry{r, r.epoch})
	}
	for r := in.finishH.popDue(step); r != nil; r = in.finishH.popDue(step) {
		r.generated = r.gen0 + int32(step-r.s0)
		s.finishRun(in, r)
	}
	in.steps++
	in.busyUS += s.now - in.stepStart
	if s.opts.Steps != nil {
		st := &s.stepRow
		*st = trace.Step{InstanceID: in.id, StepIndex: step, StartUS: in.stepStart, DurationUS: s.now - in.stepStart,
			BatchSize: int32(in.batch.Size()), PrefillTokens: int32(in.batch.PrefillTokens), DecodeTokens: int32(in.batch.DecodeSeqs),
			KVBlocksUsed: in.kv.used(), KVBlocksTotal: in.kv.total, Waiting: int32(in.waiting.len()), Running: int32(in.nrun),
			Preempted: in.preempted}
		if err := s.opts.Steps.Write(st); err != nil {
			s.fail(err)
		}
	}
	in.step++
	in.busy = false
	if s.checks {
		err := in.kv.quickCheck()
		if err == nil && in.steps%1024 == 0 {
			err = in.kv.check()
		}
		if err != nil {
			s.fail(fmt.Errorf("invariant violated: instance %d step %d: %w", in.id, step, err))
		}
	}
	s.kick(in)
}

// kick starts a step on an idle instance that has work: at once when no
// other event shares this instant, else after every same-time event (so
// that same-time arrivals join the step).
func (s *sim) kick(in *instance) {
	if in.busy || in.startPending || !in.hasWork() {
		return
	}
	if s.h.len() == 0 || s.h.top().t > s.now {
		s.startStep(in)
		return
	}
	in.startPending = true
	s.h.push(s.now, evStepStart, in.id, nil)
}

// finishRun ends a request that has produced its last token: its KV is
// released at the end of the step; the client sees the last token after the
// per-token overhead α2 of every token it streamed.
func (s *sim) finishRun(in *instance, r *reqState) {
	if r.decoding {
		s.registerHeld(in, r, r.c0+r.generated-r.gen0)
		in.nDecode--
		in.decA -= int64(r.c0) - r.s0
		r.decoding = false
	}
	in.kv.release(r)
	r.epoch++
	in.runRemove(r)
	r.finished = s.now + s.alphaTokens(r.generated)
	r.status = trace.StatusCompleted
	s.terminal(r)
}

func (s *sim) alphaTokens(n int32) int64 {
	if s.alpha2 == 0 {
		return 0
	}
	return int64(s.alpha2*float64(n) + 0.5)
}
