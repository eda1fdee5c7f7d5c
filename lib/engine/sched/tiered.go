package sched

import (
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// SetTiers puts lower KV tiers under the scheduler's store.
func (s *VLLM) SetTiers(ts *kv.Tiers) {
	s.tiers = ts
	s.kv.SetLower(ts)
}

// Tiers returns the lower KV tiers (nil: GPU only).
func (s *VLLM) Tiers() *kv.Tiers { return s.tiers }

// startLoad takes the waiting head r, whose prompt continues in lower
// tiers for lo blocks after hits GPU hits, out of the queue while those
// blocks load (vLLM's offloading connector loads asynchronously: the
// request waits, WAITING_FOR_REMOTE_KVS, while the batch runs without it).
// It holds GPU blocks for all hits+lo keys; false when they do not fit.
func (s *VLLM) startLoad(now int64, r *request.State, hits, lo int) bool {
	// Blocks for the whole prompt, so that once loaded it needs no more to
	// finish its prefill (a loaded request never waits for blocks other
	// waiting requests hold).
	need := s.blocksFor(r.NumTokens()) - int32(hits)
	free := s.kv.Free()
	if free < need || (free < need+int32(hits) && free < need+s.kv.HitCost(r.Keys, hits)) {
		// Not marked Failed: a lower tier dropping a key changes what
		// this admission needs without the GPU store noticing.
		return false
	}
	r.Failed = false
	s.waiting.pop()
	if hits > 0 {
		s.kv.Touch(&r.KV, r.Keys, hits)
		r.NReg = int32(hits)
	}
	s.kv.Alloc(&r.KV, need, r.IDBlocks(need))
	n := len(s.tiers.T)
	if cap(s.per) < n {
		s.per = make([]int32, n)
	}
	per := s.per[:n]
	ready, thrash := s.tiers.Load(r.Keys[hits:hits+lo], now, per)
	B := s.B
	t := r.Tier
	if t == nil || len(t.Cached) != n {
		t = r.NewTierLoad(n)
	}
	if r.FirstSched == row.Null {
		// Like cached_tokens: what its first scheduling found.
		for i, b := range per {
			t.Cached[i] = b * B
		}
	}
	t.ThrashTok += thrash * B
	t.ReloadUS += ready - now
	t.Loading, t.LoadFrom, t.LoadN, t.LoadReady = true, int32(hits), int32(lo), ready
	s.loading = append(s.loading, r)
	return true
}

// Wake moves the requests whose loads have ended by now back to the
// waiting queue (at their old place in its order), their loaded blocks
// now cached on the GPU.
func (s *VLLM) Wake(now int64) {
	k := 0
	for _, r := range s.loading {
		t := r.Tier
		if t.LoadReady > now {
			s.loading[k] = r
			k++
			continue
		}
		to := int(t.LoadFrom + t.LoadN)
		s.kv.Register(&r.KV, r.Keys, int(t.LoadFrom), to)
		r.NReg = int32(to)
		r.Computed = int32(to) * s.B
		t.Loading = false
		r.Holder = true
		s.waiting.push(r)
	}
	clear(s.loading[k:])
	s.loading = s.loading[:k]
}

// WakeAt is the earliest end of a load in progress (row.Null if none).
func (s *VLLM) WakeAt() int64 {
	t := int64(row.Null)
	for _, r := range s.loading {
		if t == row.Null || r.Tier.LoadReady < t {
			t = r.Tier.LoadReady
		}
	}
	return t
}

// Resume puts r, whose KV the caller has placed in its handle (Computed
// tokens of it), straight into the waiting queue: a request whose KV
// arrived from a prefill replica.
func (s *VLLM) Resume(r *request.State) {
	r.Phase = request.Waiting
	s.enqSeq++
	r.Order = s.enqSeq
	r.Holder = true
	s.waiting.push(r)
}

// Hold stops (or resumes) admitting new prompts.
func (s *VLLM) Hold(on bool) { s.hold = on }

func remove(rs []*request.State, r *request.State) []*request.State {
	if i := indexOf(rs, r); i >= 0 {
		copy(rs[i:], rs[i+1:])
		rs[len(rs)-1] = nil
		return rs[:len(rs)-1]
	}
	return rs
}
