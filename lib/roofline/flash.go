package roofline

import (
	"fmt"
	"math"
)

// Prefill attention as vLLM runs it: a FlashAttention forward kernel that
// splits each sequence's queries into blocks of Mq rows and walks the keys
// in blocks of Nk, one thread block (CTA) per query block and KV head, on
// the GPU's streaming multiprocessors in waves. Its time is the CTAs'
// makespan: the work in whole tiles (a causal query block stops at its
// diagonal, and its last key block is computed whole), spread over the SMs,
// with the last wave's idle tail and the longest CTA as floors. Before it, a
// separate kernel writes the step's keys and values into the paged cache
// (vLLM's reshape_and_cache_flash), memory bound, so it adds to the step
// rather than hiding under the MMAs. docs/latency.md, "Prefill attention:
// tiles and waves", derives the form and fits the constants.

// FlashKernel is a GPU's prefill attention kernel: which FlashAttention
// generation vLLM runs on it and the constants fitted on its measured
// context-attention table. Kernel "" turns the model off: prefill
// attention is then FLOPs and bytes at efficiency.attention.
type FlashKernel struct {
	Kernel  string  `yaml:"kernel"`   // "fa3" (Hopper: warpgroup MMAs, GQA heads packed into a query block) or "fa2" (Ampere, Ada: vLLM's paged split-KV kernel)
	MMA     float64 `yaml:"mma"`      // achieved / peak tensor rate of a tile's two GEMMs (QKᵀ and PV)
	Softmax float64 `yaml:"softmax"`  // share of a tile's exponentials (16 per clock per SM) that the MMAs do not hide
	CTAUS   float64 `yaml:"cta_us"`   // per CTA: loading its query block, writing its output, the scheduler's hand-off
	FloorUS float64 `yaml:"floor_us"` // per layer of a step with prefill and no decodes: the cache-write and attention launches (in place of attention_kernel_us)
}

// On reports whether prefill attention is costed by tiles and waves.
func (k FlashKernel) On() bool { return k.Kernel != "" }

// flashTile is the query × key block of the kernel for a head size:
// FlashAttention 3's tile_size_fwd_sm90 (bf16, causal, paged KV without
// TMA, as vLLM's 16-token pages run it) and FlashAttention 2's
// run_mha_fwd_splitkv_dispatch (the kernel vLLM's fork runs whenever the
// KV cache is paged: kBlockM 64 for every head size).
func flashTile(kernel string, headDim int) (mq, nk float64) {
	if kernel == "fa3" {
		switch {
		case headDim <= 96:
			return 192, 128
		case headDim <= 128:
			return 128, 128
		case headDim <= 192:
			return 128, 96
		default:
			return 128, 80
		}
	}
	switch {
	case headDim <= 80:
		return 64, 256
	case headDim <= 128:
		return 64, 128
	default:
		return 64, 64
	}
}

// expPerClockSM is the special-function unit's exp2 throughput per clock
// per SM on compute capability 8.0–9.0 (CUDA C++ Programming Guide,
// arithmetic instruction throughput).
const expPerClockSM = 16

// flash is a deployment's prefill attention kernel with its per-shape
// constants computed once (New): the step's price reads only these.
type flash struct {
	on        bool
	heads     float64 // CTA rows of heads: KV heads (FA3 packs each group's query heads into the block) or query heads (FA2)
	group     float64 // query heads per packed row group (1 for FA2)
	mq, nk    float64 // tile
	rowsQ     float64 // query positions per block: mq / group
	pairTiles float64 // tiles per causal query–key pair per head: group / (mq·nk)
	slots     float64 // CTAs resident at once: SMs × CTAs per SM
	tileUS    float64 // one tile on one CTA slot
	ctaUS     float64
	floorUS   float64 // FloorUS − attention_kernel_us, per layer
}

// newFlash derives the kernel's constants for nh query and nkv KV heads of
// headDim on one rank.
func newFlash(g *GPU, nh, nkv float64, headDim int) flash {
	k := g.Eff.Flash
	if !k.On() || nh <= 0 || nkv <= 0 || headDim <= 0 {
		return flash{}
	}
	f := flash{on: true, heads: nh, group: 1, ctaUS: k.CTAUS, floorUS: k.FloorUS - g.Eff.AttnUS}
	f.mq, f.nk = flashTile(k.Kernel, headDim)
	occ := 1.0 // FA3: one CTA (two consumer warpgroups and a producer) fills an SM
	if k.Kernel == "fa2" {
		// As many CTAs as their shared memory (Q block, K and V blocks) fits.
		cta := 2 * float64(headDim) * (f.mq + 2*f.nk)
		occ = math.Max(1, math.Floor(g.SmemKiB*1024/cta))
	} else {
		f.heads, f.group = nkv, nh/nkv
	}
	f.rowsQ = f.mq / f.group
	f.pairTiles = f.group / (f.mq * f.nk)
	sms := float64(g.SMs)
	f.slots = sms * occ
	mma := 4 * f.mq * f.nk * float64(headDim) / (g.BF16TFLOPS * 1e12 / sms / occ) / k.MMA
	exp := f.mq * f.nk / (expPerClockSM * g.ClockMHz * 1e6 / occ)
	f.tileUS = (mma + k.Softmax*exp) * 1e6
	return f
}

// us is the kernel's makespan for seqs sequences computing tokens query
// positions over ctx cached ones, pairs causal query–key pairs in all
// (latency.Batch's PrefillSeqs, PrefillTokens, PrefillCtx, PrefillAttn).
// The work counts a varlen batch's pairs exactly; the query blocks and the
// CTA lengths take every sequence at the batch's mean length. A layer
// with a sliding window of w tokens (0: none) gives its windowed pairs and
// cached tokens (PrefillAttnW, PrefillCtxW): FlashAttention's local mask
// (window_size_left w−1) starts each query block's keys at its first row
// minus w−1, so a CTA walks at most rowsQ + w − 1 keys, over one key
// block more than that span when the window's start falls inside a block.
func (f *flash) us(seqs, tokens, ctx, pairs, w float64) float64 {
	q, c := tokens/seqs, ctx/seqs
	blocks := seqs * math.Ceil(q*f.group/f.mq)
	// Each query block computes its diagonal key block whole and its last
	// key block to the tile's edge: half a tile each, on average.
	edge := 0.5 * (1 + math.Min(f.rowsQ, q)/f.nk)
	rq := math.Min(f.rowsQ, q)
	longest := math.Ceil((c + q) / f.nk)
	shortest := math.Ceil((c + rq) / f.nk)
	if w > 0 {
		if c+q > w {
			edge += 0.5 // the window's first key block, computed whole
		}
		span := math.Ceil((rq+w-1)/f.nk) + 1
		longest, shortest = math.Min(longest, span), math.Min(shortest, span)
	}
	tiles := f.heads * (pairs*f.pairTiles + blocks*edge)
	ctas := f.heads * blocks
	work := ctas*f.ctaUS + tiles*f.tileUS
	long := f.ctaUS + longest*f.tileUS
	short := f.ctaUS + shortest*f.tileUS
	// Longest first (FA3's scheduler) leaves the shortest CTAs for the last
	// wave, which is as full as the CTA count allows.
	waves := ctas / f.slots
	spread := work/f.slots + (math.Ceil(waves)-waves)*short
	return math.Max(long, spread)
}

// ContextAttentionUS is the predicted time of one prefill attention layer
// over batch sequences of seq tokens each (no cached prefix), nh query and
// nkv KV heads of headDim, bf16: the step model's attention for that batch,
// for kernel-level checks. Without a FlashKernel it is AttentionUS of
// ContextAttention's FLOPs and bytes.
func (g *GPU) ContextAttentionUS(batch, seq, nh, nkv float64, headDim int) float64 {
	f := newFlash(g, nh, nkv, headDim)
	if !f.on {
		fl, by := ContextAttention(batch, seq, nh, nkv, float64(headDim), 2)
		return g.AttentionUS(fl, by)
	}
	hd := float64(headDim)
	tokens := batch * seq
	bw := g.HBMTBps * 1e12 * g.Eff.Memory
	write := tokens * 2 * (2 * nkv * hd) * 2  // read K, V; write them into the cache
	read := tokens * (2*nh*hd + 2*nkv*hd) * 2 // Q, K, V in; O out
	kernel := f.us(batch, tokens, 0, batch*seq*(seq+1)/2, 0)
	return g.Eff.Flash.FloorUS + write/bw*1e6 + math.Max(kernel, read/bw*1e6)
}

// validateFlash names the first field of efficiency.prefill_attention (and
// the catalogue fields it needs) that is out of range.
func (g *GPU) validateFlash(path string) error {
	k := g.Eff.Flash
	if !k.On() {
		if k != (FlashKernel{}) {
			return fmt.Errorf("%s: field efficiency.prefill_attention.kernel: expected fa3 or fa2 (or no prefill_attention at all), found nothing", path)
		}
		return nil
	}
	if k.Kernel != "fa3" && k.Kernel != "fa2" {
		return fmt.Errorf("%s: field efficiency.prefill_attention.kernel: expected fa3 or fa2, found %q", path, k.Kernel)
	}
	if !(k.MMA > 0 && k.MMA <= 1) {
		return fmt.Errorf("%s: field efficiency.prefill_attention.mma: expected a fraction in (0,1], found %v", path, k.MMA)
	}
	type field struct {
		name string
		v    float64
	}
	for _, p := range []field{{"efficiency.prefill_attention.softmax", k.Softmax}, {"efficiency.prefill_attention.cta_us", k.CTAUS}, {"efficiency.prefill_attention.floor_us", k.FloorUS}} {
		if !(p.v >= 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("%s: field %s: expected a finite non-negative number, found %v", path, p.name, p.v)
		}
	}
	need := []field{{"sms", float64(g.SMs)}, {"clock_mhz", g.ClockMHz}}
	if k.Kernel == "fa2" {
		need = append(need, field{"smem_kib", g.SmemKiB})
	}
	for _, p := range need {
		if !(p.v > 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("%s: field %s: expected a finite positive number for efficiency.prefill_attention kernel %s, found %v", path, p.name, k.Kernel, p.v)
		}
	}
	return nil
}
