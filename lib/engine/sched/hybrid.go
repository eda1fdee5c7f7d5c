package sched

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/request"
)

// Hybrid is vLLM v1's hybrid KV cache manager for a model that mixes one
// full-attention group with sliding-window groups (roofline.KVGroups;
// docs/latency.md, "Sliding windows: KV capacity"). A store block holds
// block_size tokens of one group's layers. A request's full-attention
// group holds every block of its context, as without windows (its
// kv.Handle's IDs and Anon, prefix-cached); each sliding group holds only
// the blocks that still cover its window (Handle.Slide, anonymous).
type Hybrid struct {
	Window int32 // the sliding window, tokens
	Groups int32 // sliding-window groups
}

// hybrid is Hybrid with what the scheduler derives from it once.
type hybrid struct {
	w, groups int32
	dec       int32 // blocks one sliding group holds while decoding past the window
}

func newHybrid(h *Hybrid, B int32) *hybrid {
	return &hybrid{w: h.Window, groups: h.Groups, dec: slideMax(h.Window, B)}
}

// slideSkip is how many leading blocks a sliding group has freed once c
// tokens are computed: those wholly before the window of the next token
// (vLLM's SlidingWindowManager.get_num_skipped_tokens, max(0, c − W + 1),
// over the block size, as remove_skipped_blocks frees them).
func slideSkip(c, w, B int32) int32 { return max(0, c-w+1) / B }

// slideHeld is the blocks one sliding group holds once vLLM's
// allocate_slots has given a request with c computed tokens slots for n
// more: the skipped ones are freed first, then blocks are added up to
// ⌈(c+n)/B⌉ (get_num_blocks_to_allocate counts the skipped blocks as
// held, so the chunk's every block is allocated, even those the window
// will leave behind by the chunk's end).
func slideHeld(c, n, w, B int32) int32 { return (c+n+B-1)/B - slideSkip(c, w, B) }

// slideMax is the most blocks one sliding group holds while a request
// decodes (one token a step) past the window: ⌈(W−1)/B⌉ + 1 (the window's
// W−1 cached tokens and the new one straddle that many blocks at worst).
func slideMax(w, B int32) int32 { return (w-1+B-1)/B + 1 }

// PeakBlocks bounds the sliding-window blocks a request whose
// full-attention group takes full blocks holds at once, with prefill
// chunks of at most budget tokens (threshold, when set, caps them too):
// per group ⌈(W−1+chunk)/B⌉ + 1, as vLLM's SlidingWindowSpec
// max_memory_usage_bytes counts it, and never more than the full group's.
// The router drops a request whose full and sliding blocks exceed a
// replica's (it could never run: it would preempt itself forever).
func (h *Hybrid) PeakBlocks(full int64, budget, threshold, B int32) int64 {
	chunk := int64(budget)
	if threshold > 0 {
		chunk = min(chunk, int64(threshold))
	}
	if chunk <= 0 {
		return int64(h.Groups) * full // limits unset: the full group's, a bound all the same
	}
	return int64(h.Groups) * min(full, (int64(h.Window)-1+chunk+int64(B)-1)/int64(B)+1)
}

// slideTo frees r's sliding-window blocks that left the window (vLLM's
// remove_skipped_blocks, before allocate_slots counts what to allocate)
// and returns how many r needs for n more tokens.
func (s *VLLM) slideTo(r *request.State, n int32) int32 {
	h, c := s.hy, r.Computed
	if keep := h.groups * ((c+s.B-1)/s.B - slideSkip(c, h.w, s.B)); r.KV.Slide > keep {
		s.kv.Slide(&r.KV, keep-r.KV.Slide)
	}
	return h.groups*slideHeld(c, n, h.w, s.B) - r.KV.Slide
}

// slideDecode brings r's sliding-window blocks, as it starts decoding, to
// what it holds from then on: the decode maximum (slideMax), or what its
// last prefill chunk left it when that is less (a context still inside
// the window: it does not grow as the request decodes, an approximation).
func (s *VLLM) slideDecode(r *request.State) {
	if keep := s.hy.groups * s.hy.dec; r.KV.Slide > keep {
		s.kv.Slide(&r.KV, keep-r.KV.Slide)
	}
}

// checkSlide checks a running request's sliding-window blocks: a whole
// number per group, at most the decode maximum while decoding.
func (s *VLLM) checkSlide(r *request.State) error {
	if h := s.hy; r.KV.Slide%h.groups != 0 || r.KV.Slide < 0 || r.Decoding && r.KV.Slide > h.groups*h.dec {
		return fmt.Errorf("step %d: request %s holds %d sliding-window blocks (%d groups, at most %d each while decoding)", s.step, r.Req.ID, r.KV.Slide, h.groups, h.dec)
	}
	return nil
}
