package roofline

import "fmt"

// KVGroups is vLLM v1's hybrid KV cache layout for a model whose layers
// mix full and sliding-window attention (vllm/v1/core/kv_cache_utils.py,
// _get_kv_cache_groups_uniform_page_size): the layers of each attention
// type are split into groups of Size layers (the last one padded), every
// group has its own block table over one shared pool, and a pool block
// holds block_size tokens of Size layers. A full-attention group keeps a
// request's every block; a sliding group frees the blocks that fell wholly
// out of the window (single_type_kv_cache_manager.py, SlidingWindowManager).
type KVGroups struct {
	Size   int // layers per group
	Full   int // full-attention groups
	Slide  int // sliding-window groups
	Window int // the sliding window, tokens
}

// KVGroups is the model's hybrid layout; false when its layers are all of
// one type (vLLM then keeps one group of every layer, as without windows).
// The group size is the smaller type's layer count, or the larger's when
// that is under 1.5 times the smaller (vLLM's rule, which pads instead of
// splitting: gpt-oss-120b's 18 full and 18 sliding layers are two groups
// of 18).
func (a *Arch) KVGroups() (KVGroups, bool) {
	nf, ns := a.Layers-a.WindowLayers, a.WindowLayers
	if a.Window <= 0 || ns <= 0 || nf <= 0 {
		return KVGroups{}, false
	}
	lo, hi := min(nf, ns), max(nf, ns)
	size := lo
	if 2*hi < 3*lo {
		size = hi
	}
	return KVGroups{Size: size, Full: (nf + size - 1) / size, Slide: (ns + size - 1) / size, Window: a.Window}, true
}

// KVLayout is KVGroups as a pointer, nil when the layers are all of one
// type.
func (a *Arch) KVLayout() *KVGroups {
	if g, ok := a.KVGroups(); ok {
		return &g
	}
	return nil
}

// String is the layout as a log line reads it.
func (g KVGroups) String() string {
	return fmt.Sprintf("%d full + %d sliding-window (%d tokens) groups of %d layers", g.Full, g.Slide, g.Window, g.Size)
}

// KVHybridBlocks is how many blocks of blockSize tokens vLLM's hybrid KV
// cache manager makes of one replica's KV memory (kv_cache_utils.py,
// get_num_blocks: available memory over the page size of one layer times
// the group size): a block costs Size layers' bytes, not every layer's.
// Under pipeline parallelism a rank holds its stage's share of each group
// (KVBytesPerToken's scaling), an approximation of vLLM's per-stage tensors.
func (r *Roofline) KVHybridBlocks(util float64, lim EngineLimits, blockSize int, g KVGroups) (int64, error) {
	avail, err := r.kvAvail(util, lim)
	if err != nil {
		return 0, err
	}
	return int64(avail / r.KVBlockBytes(blockSize, &g)), nil
}

// KVBlockBytes is the bytes one KV block of blockSize tokens takes on a
// rank: every layer's, or under the hybrid layout g (nil: none) one
// group's Size layers'.
func (r *Roofline) KVBlockBytes(blockSize int, g *KVGroups) float64 {
	b := r.KVBytesPerToken() * float64(blockSize)
	if g != nil {
		b = b * float64(g.Size) / float64(r.A.Layers)
	}
	return b
}
