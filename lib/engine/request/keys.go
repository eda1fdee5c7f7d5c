package request

import (
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Keyer derives a request's prefix-cache keys for one engine block size.
// Keys are derived once per request (and again only if a replica with
// another block size asks), lazily: runs without prefix hashes, or with
// prefix caching off, never pay for them.
type Keyer struct {
	Enabled     bool  // prefix caching on
	Unique      bool  // no two requests share a first prefix hash (the input promises it; kv.Handle.Unique)
	PrefixBlock int32 // tokens per prefix_hashes entry in the input table
	Block       int32 // engine block size
	scratch     []uint64
	kids        []*State
}

// Ensure derives r.Keys for k.Block if they are not derived yet.
func (k *Keyer) Ensure(r *State) {
	if r.KeysB == k.Block {
		return
	}
	r.KeysB = k.Block
	r.Keys = r.Keys[:0]
	if !k.Enabled {
		return
	}
	// (After a preemption the request looks its own keys up: Expose.)
	r.KV.Unique = k.Unique && r.Preemptions == 0
	B := k.Block
	r.Keys = kv.Keys(r.Keys, r.Req.PrefixHashes, r.Req.InputTokens, k.PrefixBlock, B)
	if len(r.Keys) == 0 || int32(len(r.Keys)) != r.Req.InputTokens/B {
		return
	}
	// The blocks this request's answer fills have no hashes of their own.
	// A later request of the same conversation (a dependent whose prompt
	// starts with this whole prompt) names them: its keys past this prompt
	// cover this prompt's tail and the answer, so use them, as vLLM would
	// hash the generated blocks. Tool calls in between are looked through.
	full := (r.Req.InputTokens + max(r.Req.OutputTokens, 1) - 1) / B
	if full <= int32(len(r.Keys)) {
		return
	}
	k.kids = append(k.kids[:0], r.Children()...)
	for i := 0; i < len(k.kids) && i < 64; i++ {
		c := k.kids[i]
		if c.Req.Kind == row.KindTool {
			k.kids = append(k.kids, c.Children()...)
			continue
		}
		if len(c.Req.PrefixHashes) == 0 {
			continue
		}
		k.scratch = kv.Keys(k.scratch, c.Req.PrefixHashes, c.Req.InputTokens, k.PrefixBlock, B)
		if len(k.scratch) <= len(r.Keys) || !equal(k.scratch[:len(r.Keys)], r.Keys) {
			continue
		}
		r.Keys = append(r.Keys, k.scratch[len(r.Keys):min(int32(len(k.scratch)), full)]...)
		return
	}
}

func equal(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
