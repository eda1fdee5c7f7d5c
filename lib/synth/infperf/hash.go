package infperf

import "github.com/blis-sim/blis/lib/rng"

// seg is a run of prompt tokens with one content: a group's system prompt,
// a prompt's question, a session's answer.
type seg struct {
	id uint64
	n  int
}

func segSys(group int) uint64       { return rng.Mix64(1<<60 | uint64(group)) }
func segQuestion(prompt int) uint64 { return rng.Mix64(2<<60 | uint64(prompt)) }
func segAnswer(prompt, round int) uint64 {
	return rng.Mix64(3<<60 | uint64(prompt)<<24 | uint64(round))
}

// hasher turns segments into prefix_hashes: one per BlockSize tokens (the
// last may be partial), each chaining the previous block's hash with which
// segments and offsets the block covers. Two prompts share a leading hash
// exactly when they share that whole leading content.
type hasher struct{}

func (h *hasher) hash(segs []seg) []uint64 {
	out := make([]uint64, 0, 8)
	prev, c, filled := uint64(0), uint64(0x243f6a8885a308d3), 0
	for _, s := range segs {
		for off := 0; off < s.n; {
			take := min(BlockSize-filled, s.n-off)
			c = rng.Mix64(c ^ s.id ^ (uint64(off)<<32|uint64(take))*0x9e3779b97f4a7c15)
			filled += take
			off += take
			if filled == BlockSize {
				prev = rng.Mix64(prev*0x9e3779b97f4a7c15 ^ c)
				out = append(out, prev)
				c, filled = 0x243f6a8885a308d3, 0
			}
		}
	}
	if filled > 0 {
		out = append(out, rng.Mix64(prev*0x9e3779b97f4a7c15^c^uint64(filled)))
	}
	return out
}
