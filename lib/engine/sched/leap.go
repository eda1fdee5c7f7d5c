package sched

import "math/bits"

// Leaping (docs/engine.md, "Leaping"): after a step that only decodes,
// the steps that follow are determined until something changes the
// batch: a request finishes, one could be admitted, a KV block cannot be
// had without preempting or without evicting a cached block that someone
// hears about. Span says how far that is; AdvanceTo applies those steps
// later, in one go, exactly as Form and Complete would have one at a time.

// Span is a run of steps a scheduler promises after forming one: each
// decodes the same Seqs requests, nothing is admitted, no request finishes
// before the last step (which may finish some), and every KV block the
// steps need is free. Step i of the run (i = 0: the one just formed) has
// DecodeCtx = Ctx0 + i·Seqs and nothing else in its batch.
type Span struct {
	Steps int64
	Seqs  int
	Ctx0  int64
}

// Span implements Scheduler, right after Form formed a step.
func (s *VLLM) Span() (Span, bool) {
	if s.nDecode == 0 || len(s.sched) > 0 || len(s.prefilling) > 0 || s.pendHead < len(s.pending) ||
		len(s.loading) > 0 || s.err != nil || s.spec != nil {
		// (speculative decoding: the steps below assume one token per
		// decoding request; the cluster holds such replicas anyway)
		return Span{}, false
	}
	// Allocations that evict a cached block change what others see (a
	// prefix index, lower tiers) or what a blocked admission is waiting
	// for: then only clean blocks count.
	clean := s.kv.Observed()
	if s.waiting.len() > 0 {
		switch {
		case s.preempted > 0:
			return Span{}, false // nothing was admitted this step: the next may
		case s.nrun >= s.cfg.MaxNumSeqs || s.cfg.MaxNumBatchedTokens <= int32(s.nDecode):
			// Nothing is admitted while the running set is full or the
			// decodes take the whole token budget.
		case s.order == nil && s.tiers == nil && !s.hold && s.waiting.peek().Failed:
			// The head did not fit this step (admission tried it: nothing
			// stopped it before); with fewer free blocks and the same
			// cache it fits no later step either.
			clean = true
		default:
			return Span{}, false
		}
	}
	first := s.step
	last, ok := s.finishH.firstLive(first)
	if !ok || last-first < 1 {
		return Span{}, false
	}
	if s.win != nil {
		// A ramp prices the windowed decode sum from the summed context
		// alone: only while no request crosses the window (window.go).
		if last, ok = s.win.spanEnd(first, last); !ok || last-first < 1 {
			return Span{}, false
		}
	}
	n := last - first + 1
	// The later steps' Forms give a block to each live entry of their
	// bucket. Stale entries (requests gone since) are counted too: they
	// only shorten the span; Form and AdvanceTo drop them as they go.
	B := int64(s.B)
	visit := min(n-1, B)
	var round int64
	var mask uint64
	// Bucket indices advance by one, wrapping: no division per step.
	p := (first + 1) % B
	for k := int64(1); k <= visit; k++ {
		m := int64(s.bound.h[p].n)
		round += m
		if m > 0 {
			mask |= 1 << uint(p) // (0 from p = 64 on)
		}
		if p++; p == B {
			p = 0
		}
	}
	s.leapMask = 0
	if B <= 64 {
		s.leapMask = mask
	}
	free := int64(s.kv.Free())
	if clean {
		free = min(free, int64(s.kv.CleanFree()))
	}
	// The most steps whose allocations fit: whole rounds of B steps, then
	// step by step.
	k := int64(0)
	if visit == B && round > 0 {
		q := min((n-1)/B, free/round)
		k, free = q*B, free-q*round
	} else if round == 0 {
		k = n - 1
	}
	for p = (first + 1 + k) % B; k < n-1; k++ {
		need := int64(s.bound.h[p].n)
		if need > free {
			break
		}
		free -= need
		if p++; p == B {
			p = 0
		}
	}
	if k < 1 {
		return Span{}, false
	}
	return Span{Steps: k + 1, Seqs: s.nDecode, Ctx0: s.decA + int64(s.nDecode)*first}, true
}

// AdvanceTo implements Scheduler: within a span, the steps before next
// have completed (the last at lastEnd) and step next has been formed
// (started at lastStart) when formed is set, else the last one formed is
// next−1 (started at lastStart). Their blocks are allocated in the order
// Form would have allocated them.
func (s *VLLM) AdvanceTo(next int64, formed bool, lastStart, lastEnd int64) {
	to := next
	if !formed {
		to = next - 1
	}
	if to > s.formedTo {
		// Over many rounds of buckets, a call per request and round is
		// worth saving.
		if to-s.formedTo < 4*int64(s.B) || !s.advanceAnon(s.formedTo+1, to) {
			s.advanceBlocks(s.formedTo+1, to)
		}
		s.formedTo = to
		s.lastStart = lastStart
		if s.tiers != nil {
			s.tiers.SetNow(lastStart, 0)
		}
	}
	if next > s.step {
		s.step = next
		s.lastEnd = lastEnd
	}
}

// advanceBlocks gives the blocks of steps from..to as their Forms would,
// step by step: anonymous ones from the head run of the free queue are
// counted and taken at once (TakeAnon), before any other.
func (s *VLLM) advanceBlocks(from, to int64) {
	B := int64(s.B)
	avail, taken := s.kv.AnonHead(), int32(0)
	p := from % B // j % B, kept as j advances
	for j := from; j <= to; {
		if B <= 64 {
			// Jump to the next step whose bucket has entries.
			m := s.leapMask >> uint(p)
			if m == 0 {
				j += B - p
				p = 0
				continue
			}
			tz := int64(bits.TrailingZeros64(m))
			j, p = j+tz, p+tz
			if j > to {
				break
			}
		}
		avail, taken = s.allocBucket(p, avail, taken)
		j++
		if p++; p == B {
			p = 0
		}
	}
	s.kv.TakeAnon(taken)
}

// allocBucket gives each live entry of bucket p its block, as Form would
// with blocks to spare; stale entries are dropped (swapped with the last,
// as Form does). Anonymous blocks from the head run of the free queue
// (avail of them, taken so far not yet taken from the store) are counted
// and taken at once (TakeAnon), before any other block; the caller takes
// the last count. Anonymous blocks past that run (evicting cached blocks)
// are taken from the queue's head in the same order, for no request in
// particular: a request's anonymous blocks are a count.
func (s *VLLM) allocBucket(p int64, avail, taken int32) (int32, int32) {
	if h := &s.bound.h[p]; h.slow == 0 {
		// Every entry is live and takes an anonymous block: the bucket's
		// memory is not read.
		h.gen++
		if h.n <= avail-taken {
			return avail, taken + h.n
		}
		s.kv.TakeAnon(avail)
		s.takeAnon(h.n - (avail - taken))
		return s.kv.AnonHead(), 0
	}
	bucket := s.bound.at(p)
	for i := 0; i < len(bucket); {
		x := &bucket[i]
		if x.r == nil {
			s.bound.drop(p, i)
			bucket = bucket[:len(bucket)-1]
			continue
		}
		switch {
		case x.ids > 0:
			s.kv.TakeAnon(taken)
			r := x.r
			r.KV.Anon = s.bound.anon(p, x)
			s.kv.Alloc(&r.KV, 1, 1)
			s.bound.bind(p, x, r)
			avail, taken = s.kv.AnonHead(), 0
		case taken < avail:
			x.anon++ // (the State stays out of the cache)
			taken++
		default:
			s.kv.TakeAnon(taken)
			s.takeAnon(1)
			x.anon++
			avail, taken = s.kv.AnonHead(), 0
		}
		i++
	}
	return avail, taken
}

// takeAnon takes n anonymous blocks from the head of the free queue as n
// calls Alloc(h, 1, 0) would (evicting cached blocks), the caller adding
// them to the handles.
func (s *VLLM) takeAnon(n int32) {
	s.anonSink.Anon = 0
	s.kv.Alloc(&s.anonSink, n, 0)
}

// advanceAnon gives the blocks of steps from..to in one call when that is
// the same as Form's block by block: every block is anonymous (no prefix
// key: no id) and comes from anonymous runs at the head of the free queue
// (no cached block evicted), so which request takes which block does not
// matter. The buckets are cleaned as Form would on its first visit; false
// (nothing done but that, or nothing at all when no free block is clean)
// when it does not apply.
func (s *VLLM) advanceAnon(from, to int64) bool {
	// A full cache's free queue starts with cached blocks (least recently
	// freed first): then no block is clean and the buckets need not be
	// read here (advanceBlocks drops their stale entries as this would).
	clean := int64(s.kv.CleanFree())
	if clean == 0 {
		return false
	}
	B := int64(s.B)
	steps := to - from + 1
	var total int64
	for k := int64(0); k < min(steps, B); k++ {
		p := (from + k) % B
		n := (steps - k + B - 1) / B // its steps in from..to (≥ 1)
		if s.bound.h[p].slow == 0 {
			total += n * int64(s.bound.h[p].n)
			continue
		}
		for i := 0; i < int(s.bound.h[p].n); {
			x := s.bound.at(p)[i]
			if x.r == nil {
				s.bound.drop(p, i)
				continue
			}
			if x.ids != 0 {
				return false
			}
			total += n
			i++
		}
	}
	if total > clean {
		return false
	}
	// Every entry left is live and anonymous: each of bucket p's takes n
	// blocks.
	for k := int64(0); k < min(steps, B); k++ {
		s.bound.h[(from+k)%B].gen += int32((steps - k + B - 1) / B)
	}
	s.takeAnon(int32(total))
	return true
}

// NextAlloc implements Scheduler: the first step after the last formed
// one whose bucket holds entries (some may be stale: it may give no block).
func (s *VLLM) NextAlloc() (int64, bool) {
	B := int64(s.B)
	j := s.formedTo + 1
	if B <= 64 {
		if s.leapMask == 0 {
			return 0, false
		}
		p := uint(j % B)
		if m := s.leapMask >> p; m != 0 {
			return j + int64(bits.TrailingZeros64(m)), true
		}
		return j + (B - int64(p)) + int64(bits.TrailingZeros64(s.leapMask)), true
	}
	for k := int64(0); k < B; k++ {
		if s.bound.h[(j+k)%B].n > 0 {
			return j + k, true
		}
	}
	return 0, false
}
