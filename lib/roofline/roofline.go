// Package roofline predicts engine step times from a model's config.json and
// a GPU's peaks: every GEMM and attention kernel of a step is costed as
// max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth) plus a kernel
// floor, tensor parallelism divides the work and adds two all-reduces per
// layer. It also says how much KV cache fits on a replica.
package roofline

import (
	"fmt"
	"math"
	"sync"

	"github.com/blis-sim/blis/lib/latency"
)

// gemm is one weight matrix multiply per layer: output width n, reduction k,
// both already divided by TP where the layer is sharded; wb bytes per weight
// and flops the achieved FLOP/s of its precision (quantised layers and the
// ones a checkpoint leaves in the activation dtype differ in both).
type gemm struct{ n, k, wb, flops float64 }

// Roofline is a latency.Model for one (model, GPU, TP) deployment.
type Roofline struct {
	A  *Arch
	G  GPU
	TP int

	attnGemms []gemm    // every layer
	mlpGemms  []gemm    // dense layers
	shGemms   []gemm    // MoE layers: shared experts and router
	expGemms  []gemm    // one routed expert (sharded)
	moe       MoEKernel // measured routed-expert kernel, when it applies (else expGemms)
	head      gemm      // LM head (vocab-parallel)

	ab, kvb        float64 // bytes per activation, KV element
	attnFLOPs      float64 // achieved FLOP/s for attention (bf16)
	bw             float64 // achieved B/s
	kvLayerRank    float64 // KV elements per token per layer on one rank
	attnPairFLOPsP float64 // FLOPs per causal query-key pair per layer per rank (prefill)
	attnPairFLOPsD float64 // same, decode (MLA decodes in the absorbed latent form)
	ctxUpFLOPs     float64 // MLA prefill: FLOPs per cached context token to up-project its latent
	qoElemsRank    float64 // query + output elements per token per layer per rank
	elemDense      float64 // elementwise elements read+written per token in a dense layer (norms, rope, SiLU·mul)
	elemMoE        float64 // same for a MoE layer
	fl             flash   // prefill attention by tiles and waves (flash.go); off: by FLOPs and bytes
	name           string
	par            *par // DP, EP, PP (parallel.go); nil: TP only
	dense          *denseTab
	lf, lw         float64 // full and sliding-window layers (lw 0: no window)
}

// denseTab holds, for a dense model, the layers' GEMM terms of batches of
// 1 to denseTabLen−1 tokens, each summed as weights sums them (so exactly
// equal): a step costs a lookup instead of a cube root per GEMM. Built at
// the first use, once, however many simulations share the roofline.
type denseTab struct {
	once sync.Once
	t    []Terms
	// The LM head's gemmCost terms for 1 to headTabLen−1 sequences (any
	// model): gemmCost adds one value to each of its fields, so adding the
	// tabled value is the same addition.
	headOnce sync.Once
	head     []gemmTerms
}

const denseTabLen, headTabLen = 2048, 1025 // headTabLen: vllm serve's largest max_num_seqs, 1024

// gemmTerms are the Terms fields gemmCost adds to.
type gemmTerms struct{ flops, bytes, compute, memory, roof, kernels float64 }

// New builds the roofline for an architecture on a GPU with TP ranks. Its
// errors about tp carry no prefix: callers name their flag or field.
func New(a *Arch, g GPU, tp int) (*Roofline, error) {
	if tp < 1 {
		return nil, fmt.Errorf("expected a positive integer, found %d", tp)
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if err := g.Validate(g.Name); err != nil {
		return nil, err
	}
	if tp > 1 && !(g.LinkGBps > 0) {
		return nil, fmt.Errorf("%s: field link_gb_s: expected a positive number for tp > 1, found %v", g.Name, g.LinkGBps)
	}
	if a.Heads%tp != 0 {
		return nil, fmt.Errorf("%s has %d attention heads, not divisible by tp %d", a.Name, a.Heads, tp)
	}
	t := float64(tp)
	r := &Roofline{A: a, G: g, TP: tp, name: fmt.Sprintf("roofline:%s/%s/tp%d", a.Name, g.Name, tp), dense: &denseTab{}}
	h, nh := float64(a.Hidden), float64(a.Heads)
	// Quantised layers (wq, fq), the ones kept in the activation dtype (wu,
	// fu) and the attention projections (one or the other).
	wq, fq := a.WeightDtype.Bytes(), g.PeakTFLOPS(a.Math())*1e12*g.Eff.GEMM
	wu, fu := a.ActDtype.Bytes(), g.PeakTFLOPS(a.ActDtype)*1e12*g.Eff.GEMM
	wa, fa := wq, fq
	if a.AttnUnquantized {
		wa, fa = wu, fu
	}
	attn := func(n, k float64) gemm { return gemm{n, k, wa, fa} }
	quant := func(n, k float64) gemm { return gemm{n, k, wq, fq} }
	unquant := func(n, k float64) gemm { return gemm{n, k, wu, fu} }
	r.head = unquant(float64(a.Vocab)/t, h)
	if a.MLA() {
		qk := float64(a.QKNopeDim + a.QKRopeDim)
		if a.QLoraRank > 0 {
			ql := float64(a.QLoraRank)
			r.attnGemms = append(r.attnGemms, attn(ql, h), attn(nh*qk/t, ql)) // q_a replicated, q_b column
		} else {
			r.attnGemms = append(r.attnGemms, attn(nh*qk/t, h))
		}
		r.attnGemms = append(r.attnGemms,
			attn(float64(a.KVLoraRank+a.QKRopeDim), h),                        // kv_a, replicated
			attn(nh*float64(a.QKNopeDim+a.VHeadDim)/t, float64(a.KVLoraRank)), // kv_b, column
			attn(h, nh*float64(a.VHeadDim)/t))                                 // o, row
		r.kvLayerRank = float64(a.KVLoraRank + a.QKRopeDim)
		r.attnPairFLOPsP = 2 * nh / t * float64(a.QKNopeDim+a.QKRopeDim+a.VHeadDim)
		r.attnPairFLOPsD = 2 * nh / t * float64(2*a.KVLoraRank+a.QKRopeDim)
		r.ctxUpFLOPs = 2 * float64(a.KVLoraRank) * nh / t * float64(a.QKNopeDim+a.VHeadDim)
		r.qoElemsRank = nh / t * float64(a.QKNopeDim+a.QKRopeDim+a.VHeadDim)
	} else {
		hd := float64(a.HeadDim)
		kvh := a.kvHeadsPerRank(tp)
		r.attnGemms = append(r.attnGemms,
			attn((nh/t+2*kvh)*hd, h), // fused qkv, column (KV heads replicated when fewer than TP)
			attn(h, nh*hd/t))         // o, row
		r.kvLayerRank = 2 * kvh * hd
		r.attnPairFLOPsP = 4 * nh / t * hd
		r.attnPairFLOPsD = r.attnPairFLOPsP
		r.qoElemsRank = 2 * nh / t * hd
		r.fl = newFlash(&g, nh/t, kvh, a.HeadDim) // MLA prefill keeps the FLOP count: its kernel is not this one
	}
	// Elementwise kernels per token: two RMSNorms (read + write hidden),
	// rotary on q and k, SiLU·mul (read gate and up, write one).
	rope := 2 * (nh/t + a.kvHeadsPerRank(tp)) * float64(a.HeadDim)
	if a.MLA() {
		rope = 2 * (nh/t + 1) * float64(a.QKRopeDim)
	}
	r.elemDense = 4*h + rope + 3*float64(a.Intermediate)/t
	r.elemMoE = 4*h + rope + 3*(float64(a.ExpertsPerTok*a.ExpertIntermediate)+float64(a.SharedIntermediate))/t
	if a.DenseLayers() > 0 {
		i := float64(a.Intermediate)
		r.mlpGemms = []gemm{quant(2*i/t, h), quant(h, i/t)}
	}
	if a.MoE() {
		r.shGemms = append(r.shGemms, unquant(float64(a.Experts), h)) // router, replicated
		if a.SharedIntermediate > 0 {
			s := float64(a.SharedIntermediate)
			r.shGemms = append(r.shGemms, quant(2*s/t, h), quant(h, s/t))
		}
		e := float64(a.ExpertIntermediate)
		r.expGemms = []gemm{quant(2*e/t, h), quant(h, e/t)}
		if a.WeightDtype == FP4 && a.Math() != FP4 && g.Eff.MXFP4MoE.on() {
			r.moe = g.Eff.MXFP4MoE
		}
	}
	if a.Window > 0 && a.WindowLayers > 0 {
		r.lf, r.lw = float64(a.Layers-a.WindowLayers), float64(a.WindowLayers)
	}
	r.ab, r.kvb = a.ActDtype.Bytes(), a.KVDtype.Bytes()
	r.attnFLOPs = g.BF16TFLOPS * 1e12 * g.Eff.Attention
	r.bw = g.HBMTBps * 1e12 * g.Eff.Memory
	return r, nil
}

// Terms is one step's cost, per rank. Times in µs.
type Terms struct {
	GEMMFLOPs, GEMMBytes float64 // all weight GEMMs incl. experts and LM head
	AttnFLOPs, AttnBytes float64 // attention kernels (KV read + write, Q/O)
	ElemBytes            float64 // elementwise kernels (norms, rope, activation)
	CommBytes            float64 // all-reduce payload per rank
	ComputeUS            float64 // Σ over kernels of FLOPs / achieved FLOP/s
	MemoryUS             float64 // Σ over kernels of bytes / achieved bandwidth
	RoofUS               float64 // Σ over kernels of max(compute, memory)
	CommUS               float64 // all-reduce time
	OverheadUS           float64 // kernel floors, per-layer and per-step overheads
	TotalUS              float64 // RoofUS + CommUS + OverheadUS
	Kernels              float64 // GEMM kernels costed (for the GEMM kernel floor)
}

// gemmCost adds count m×n×k GEMMs whose weights are read weightCopies times.
func (r *Roofline) gemmCost(t *Terms, m float64, g gemm, count, weightCopies float64) {
	if m <= 0 {
		return
	}
	f := 2 * m * g.n * g.k
	by := (m*g.k+m*g.n)*r.ab + g.n*g.k*g.wb*weightCopies
	c, mem := f/g.flops*1e6, by/r.bw*1e6
	t.GEMMFLOPs += f * count
	t.GEMMBytes += by * count
	t.ComputeUS += c * count
	t.MemoryUS += mem * count
	t.RoofUS += gemmRoof(c, mem) * count
	t.Kernels += count
}

// gemmRoof is a GEMM's time from its compute and memory times: the larger,
// plus what the smaller adds near the ridge, where neither hides the other
// (a 3-norm, (c³ + m³)^⅓: at most 2^⅓ = 1.26× the larger, where the two
// are equal). A tiled GEMM overlaps its loads with its MMAs only while one
// side has slack: near the ridge the same SMs stall on both. Fitted on the
// aiconfigurator GEMM tables of H100, A100 and L40S (vLLM's bf16 kernels):
// every GPU's median error improves with the exponent fitted on the other
// two, and at m 129–257 on H100 the bias goes from −7% to 0% (docs/latency.md,
// "The GEMM ridge").
func gemmRoof(c, m float64) float64 {
	hi, lo := c, m
	if lo > hi {
		hi, lo = lo, hi
	}
	if lo <= 0 {
		return hi
	}
	x := lo / hi
	return hi * math.Cbrt(1+x*x*x)
}

// moeKernelCost adds count MoE layers' routed experts costed by the measured
// kernel (MoEKernel): rows token-expert rows over touched experts. The
// weight stream counts as the memory term, the fixed cost as overhead.
func (r *Roofline) moeKernelCost(t *Terms, rows, touched, count float64) {
	r.moeKernelCostOf(t, r.expGemms, rows, touched, count)
}

// moeKernelCostOf is moeKernelCost for the expert GEMMs gs (EP holds whole
// experts: parallel.go).
func (r *Roofline) moeKernelCostOf(t *Terms, gs []gemm, rows, touched, count float64) {
	var w, by float64 // weights per expert per rank; bytes of one layer
	for _, g := range gs {
		w += g.n * g.k
		by += rows*(g.n+g.k)*r.ab + g.n*g.k*g.wb*touched
	}
	f := 2 * rows * w
	c := f / (r.G.BF16TFLOPS * 1e12 * r.moe.GEMM) * 1e6
	ws := touched * w / (r.moe.WeightRate * 1e12) * 1e6
	t.GEMMFLOPs += f * count
	t.GEMMBytes += by * count
	t.ComputeUS += c * count
	t.MemoryUS += ws * count
	t.RoofUS += math.Max(c, ws) * count
	t.OverheadUS += r.moe.LayerUS * count
}

// GEMMUS is the predicted time of one m×n×k GEMM (weights n×k in w,
// activations in a): kernel floor + max(compute, memory). The step model
// costs every GEMM this way.
func (g *GPU) GEMMUS(m, n, k float64, w, a Dtype) float64 {
	f := 2 * m * n * k
	by := (m*k+m*n)*a.Bytes() + n*k*w.Bytes()
	c := f / (g.PeakTFLOPS(w) * 1e12 * g.Eff.GEMM) * 1e6
	mem := by / (g.HBMTBps * 1e12 * g.Eff.Memory) * 1e6
	return g.Eff.KernelUS + gemmRoof(c, mem)
}

// AllReduceUS is one all-reduce of bytes across n ranks: the small-message
// latency plus a ring's 2(n−1)/n of the message at the achieved link
// bandwidth.
func (g *GPU) AllReduceUS(bytes float64, n int) float64 {
	if n <= 1 {
		return 0
	}
	ring := bytes * 2 * float64(n-1) / float64(n)
	return g.LinkLatUS + ring/(g.LinkGBps*1e9*g.Eff.Link)*1e6
}

// AttentionUS is the predicted time of one attention kernel doing flops
// (BF16 tensor cores) and moving bytes.
func (g *GPU) AttentionUS(flops, bytes float64) float64 {
	c := flops / (g.BF16TFLOPS * 1e12 * g.Eff.Attention) * 1e6
	mem := bytes / (g.HBMTBps * 1e12 * g.Eff.Memory) * 1e6
	return g.Eff.AttnUS + math.Max(c, mem)
}

// ContextAttention returns FLOPs and bytes of causal self-attention over
// batch sequences of seq tokens each (no cached prefix), for nh query heads,
// nkv KV heads of headDim, elements of eb bytes.
func ContextAttention(batch, seq, nh, nkv, headDim, eb float64) (flops, bytes float64) {
	pairs := batch * seq * (seq + 1) / 2
	return 4 * nh * headDim * pairs, batch * seq * (2*nh*headDim + 4*nkv*headDim) * eb
}

// DecodeAttention returns FLOPs and bytes of one decode step for batch
// sequences with kv cached tokens each (plus the new one).
func DecodeAttention(batch, kv, nh, nkv, headDim, eb float64) (flops, bytes float64) {
	ctx := kv + 1
	return 4 * nh * headDim * batch * ctx, batch * (ctx*2*nkv*headDim + 2*nkv*headDim + 2*nh*headDim) * eb
}

// DenseLayerUS is the predicted time of one dense layer's non-attention
// work for T tokens on one rank: its GEMMs (QKV, O, gate+up, down, each with
// the kernel floor) and its elementwise kernels (with the per-layer floor).
// It is the step model restricted to one layer, for layer-level checks.
func (r *Roofline) DenseLayerUS(T float64) (gemmUS, elemUS float64) {
	var t Terms
	for _, g := range r.attnGemms {
		r.gemmCost(&t, T, g, 1, 1)
	}
	for _, g := range r.mlpGemms {
		r.gemmCost(&t, T, g, 1, 1)
	}
	gemmUS = t.RoofUS + t.Kernels*r.G.Eff.KernelUS
	elemUS = T*r.elemDense*r.ab/r.bw*1e6 + r.G.Eff.LayerUS
	return gemmUS, elemUS
}

// ExpectedExperts is the expected number of distinct experts a layer's
// router picks for tokens tokens, each choosing k of E uniformly:
// E·(1 − (1 − k/E)^tokens).
func ExpectedExperts(experts, k int, tokens float64) float64 {
	if experts <= 0 || tokens <= 0 {
		return 0
	}
	e := float64(experts)
	return e * (1 - math.Pow(1-float64(k)/e, tokens))
}

// Terms computes the cost of a batch: its weight GEMMs, its attention and
// the rest (elementwise kernels, all-reduces, overheads). Only attention
// reads the context lengths, which DecodeTerms relies on.
func (r *Roofline) Terms(b *latency.Batch) Terms {
	var t Terms
	if r.par != nil && r.par.PP > 1 {
		r.pipelined(&t, b) // parallel.go
	} else {
		r.terms(&t, b)
	}
	return t
}

// terms fills t (zero) with the cost of b on every layer.
func (r *Roofline) terms(t *Terms, b *latency.Batch) {
	T := float64(b.PrefillTokens) + float64(b.DecodeSeqs)
	if T <= 0 {
		return
	}
	r.weights(t, b, T)
	r.attention(t, b, T)
	r.tail(t, T)
}

// weights adds the weight GEMMs of a batch of T tokens (experts and LM
// head included) to t, which is zero (every caller's).
func (r *Roofline) weights(t *Terms, b *latency.Batch, T float64) {
	if i := int(T); !r.A.MoE() && float64(i) == T && i > 0 && i < denseTabLen {
		d := r.dense
		d.once.Do(func() {
			d.t = make([]Terms, denseTabLen)
			for n := 1; n < denseTabLen; n++ {
				r.layerGemms(&d.t[n], float64(n))
			}
		})
		*t = d.t[i]
	} else {
		r.layerGemms(t, T)
	}
	// LM head: logits for one position per sequence (last prefill chunk token or decode token).
	if s := b.PrefillSeqs + b.DecodeSeqs; s > 0 && s < headTabLen {
		d := r.dense
		d.headOnce.Do(func() {
			d.head = make([]gemmTerms, headTabLen)
			for n := 1; n < headTabLen; n++ {
				var h Terms
				r.gemmCost(&h, float64(n), r.head, 1, 1)
				d.head[n] = gemmTerms{h.GEMMFLOPs, h.GEMMBytes, h.ComputeUS, h.MemoryUS, h.RoofUS, h.Kernels}
			}
		})
		h := &d.head[s]
		t.GEMMFLOPs += h.flops
		t.GEMMBytes += h.bytes
		t.ComputeUS += h.compute
		t.MemoryUS += h.memory
		t.RoofUS += h.roof
		t.Kernels += h.kernels
	} else if s > 0 {
		r.gemmCost(t, float64(s), r.head, 1, 1)
	}
}

// layerGemms adds the layers' weight GEMMs of a batch of T tokens.
func (r *Roofline) layerGemms(t *Terms, T float64) {
	a := r.A
	L := float64(a.Layers)
	for _, g := range r.attnGemms {
		r.gemmCost(t, T, g, L, 1)
	}
	for _, g := range r.mlpGemms {
		r.gemmCost(t, T, g, float64(a.DenseLayers()), 1)
	}
	if a.MoE() {
		lm := float64(a.MoELayers)
		for _, g := range r.shGemms {
			r.gemmCost(t, T, g, lm, 1)
		}
		// Routed experts as one grouped GEMM: all T·k token-expert rows, the
		// weights of the distinct experts touched.
		touched := ExpectedExperts(a.Experts, a.ExpertsPerTok, T)
		rows := T * float64(a.ExpertsPerTok)
		if r.par != nil && r.routedExperts(t, T) {
			// DP and EP (parallel.go)
		} else if r.moe.on() {
			r.moeKernelCost(t, rows, touched, lm)
		} else {
			for _, g := range r.expGemms {
				r.gemmCost(t, rows, g, lm, touched)
			}
		}
	}
}

// attention adds one attention kernel per layer covering the prefill
// chunks and the decodes: full layers over the whole context, sliding-
// window layers over the window's (docs/latency.md, "Sliding windows").
// DecodeCost.At (leap.go) evaluates it for decode-only batches: a change
// here is made there too (TestDecodeCostExact).
func (r *Roofline) attention(t *Terms, b *latency.Batch, T float64) {
	if r.lw == 0 {
		r.attnLayers(t, b, T, float64(r.A.Layers), float64(b.PrefillAttn), float64(b.PrefillCtx), float64(b.DecodeCtx), 0)
		return
	}
	pw, cw, dw := r.windowed(b)
	if r.lf > 0 {
		r.attnLayers(t, b, T, r.lf, float64(b.PrefillAttn), float64(b.PrefillCtx), float64(b.DecodeCtx), 0)
	}
	r.attnLayers(t, b, T, r.lw, float64(pw), float64(cw), float64(dw), float64(r.A.Window))
}

// windowed is the batch's sums on a sliding-window layer (latency.Batch's
// PrefillAttnW, PrefillCtxW, DecodeCtxW), each taken at the batch's mean
// request when the batch does not give it.
func (r *Roofline) windowed(b *latency.Batch) (pairsP, ctxP, ctxD int64) {
	w := int64(r.A.Window)
	pairsP, ctxP, ctxD = b.PrefillAttnW, b.PrefillCtxW, b.DecodeCtxW
	if s := int64(b.PrefillSeqs); s > 0 {
		if pairsP == 0 && b.PrefillTokens > 0 {
			c, n := float64(b.PrefillCtx)/float64(s), float64(b.PrefillTokens)/float64(s)
			pairsP = int64(float64(s)*(windowPrefix(c+n, float64(w))-windowPrefix(c, float64(w))) + 0.5)
		}
		if ctxP == 0 && b.PrefillCtx > 0 {
			ctxP = int64(float64(s)*math.Min(float64(b.PrefillCtx)/float64(s), float64(w-1)) + 0.5)
		}
	}
	if ctxD == 0 && b.DecodeCtx > 0 {
		ctxD = min(b.DecodeCtx, int64(b.DecodeSeqs)*(w-1))
	}
	return pairsP, ctxP, ctxD
}

// windowPrefix is Σ_{q=1..x} min(q, w) for a real x ≥ 0
// (latency.WindowPairs' form).
func windowPrefix(x, w float64) float64 {
	if x <= w {
		return x * (x + 1) / 2
	}
	return w*(w+1)/2 + (x-w)*w
}

// attnLayers adds L layers' attention: pairsP causal query–key pairs of
// the prefill chunks, which read ctxP cached tokens, and decodes over ctxD
// cached tokens in all; w is the layers' window (0: full).
func (r *Roofline) attnLayers(t *Terms, b *latency.Batch, T, L, pairsP, ctxP, ctxD, w float64) {
	pairsD := ctxD
	af := r.attnPairFLOPsP*pairsP + r.attnPairFLOPsD*pairsD + r.ctxUpFLOPs*ctxP
	kvRead := ctxP + float64(b.PrefillTokens) + ctxD
	ab := (kvRead+T)*r.kvLayerRank*r.kvb + T*r.qoElemsRank*r.ab
	t.AttnFLOPs += af * L
	t.AttnBytes += ab * L
	if r.fl.on && b.PrefillSeqs > 0 {
		// Tiles and waves (flash.go). The cache write (read the step's K
		// and V, store them in their pages) is its own kernel before the
		// attention's, so it adds. Decodes ride in the attention kernel,
		// costed as before; a kernel with decodes keeps their floor
		// (attention_kernel_us: split-KV scheduling and combine), one
		// without has the prefill kernel's. Decode-only steps take the
		// form below, which leap.go sums in closed form.
		write := 2 * T * r.kvLayerRank * r.kvb / r.bw * 1e6
		read := (ab - T*r.kvLayerRank*r.kvb) / r.bw * 1e6
		c := r.fl.us(float64(b.PrefillSeqs), float64(b.PrefillTokens), ctxP, pairsP, w) + r.attnPairFLOPsD*pairsD/r.attnFLOPs*1e6
		t.AttnBytes += T * r.kvLayerRank * r.kvb * L
		t.ComputeUS += c * L
		t.MemoryUS += (write + read) * L
		t.RoofUS += (write + math.Max(c, read)) * L
		if b.DecodeSeqs == 0 {
			t.OverheadUS += r.fl.floorUS * L
		}
		return
	}
	c, m := af/r.attnFLOPs*1e6, ab/r.bw*1e6
	t.ComputeUS += c * L
	t.MemoryUS += m * L
	t.RoofUS += math.Max(c, m) * L
}

// tail adds the elementwise kernels, the all-reduces and the fixed
// overheads, and sums the step.
func (r *Roofline) tail(t *Terms, T float64) {
	a := r.A
	L := float64(a.Layers)
	// Elementwise kernels: memory bound; their launch floor is layer_overhead_us.
	t.ElemBytes = T * (float64(a.DenseLayers())*r.elemDense + float64(a.MoELayers)*r.elemMoE) * r.ab
	em := t.ElemBytes / r.bw * 1e6
	t.MemoryUS += em
	t.RoofUS += em

	if r.TP > 1 {
		msg := T * float64(a.Hidden) * r.ab
		n := float64(r.TP)
		ar := 2 * L
		t.CommBytes = ar * msg * 2 * (n - 1) / n
		t.CommUS = ar * r.G.AllReduceUS(msg, r.TP)
	}
	if r.par != nil {
		r.a2aUS(t, T) // dispatch and combine between DP ranks (parallel.go)
	}
	t.OverheadUS += t.Kernels*r.G.Eff.KernelUS + L*(r.G.Eff.AttnUS+r.G.Eff.LayerUS) + r.G.Eff.StepUS
	if r.TP > 1 {
		t.OverheadUS += r.G.Eff.TPStepUS
	}
	t.TotalUS = t.RoofUS + t.CommUS + t.OverheadUS
}

// MaxStepUS caps a step (latency.MaxStepUS): an absurd GPU file must not
// wrap the int64 step or, summed over many steps, the engine clock.
const MaxStepUS = latency.MaxStepUS

// StepTime implements latency.Model.
func (r *Roofline) StepTime(b *latency.Batch) int64 {
	t := r.Terms(b)
	return stepUS(t.TotalUS)
}

// stepUS rounds a step's total to whole µs, between 1 and MaxStepUS.
func stepUS(total float64) int64 {
	if !(total < MaxStepUS) {
		return MaxStepUS
	}
	us := int64(total + 0.5)
	if us < 1 {
		return 1
	}
	return us
}

// HostStepUS implements latency.HostTimer: the engine's CPU work for the
// step, seq_step_overhead_us per request in the batch plus, at TP > 1,
// tp_host_overhead_us. It is not part of StepTime: the engine adds it or
// overlaps it with the GPU step depending on its scheduler (latency.WithHost).
func (r *Roofline) HostStepUS(b *latency.Batch) int64 {
	us := float64(b.PrefillSeqs+b.DecodeSeqs) * r.G.Eff.SeqStepUS
	if r.TP > 1 {
		us += r.G.Eff.TPHostUS
	}
	if !(us < MaxStepUS) {
		return MaxStepUS // an absurd GPU file must not wrap the int64
	}
	return int64(us + 0.5)
}

// HostTimed implements latency.HostTimer.
func (r *Roofline) HostTimed() bool {
	return r.G.Eff.SeqStepUS > 0 || (r.TP > 1 && r.G.Eff.TPHostUS > 0)
}

// Alpha implements latency.Model: the engine's request path outside the
// GPU step, vLLM's default α0 (latency.DefaultAlpha), and the API server's
// tokenisation before a request is queued (α1, the profile's tokenize_us).
func (r *Roofline) Alpha() latency.Alpha {
	a := latency.DefaultAlpha()
	a.QueuePerInputToken = r.G.Eff.TokenizeUS
	return a
}

// Name implements latency.Model.
func (r *Roofline) Name() string { return r.name }

// Window implements latency.Windowed: the model's sliding window in
// tokens when some of its layers attend over one, else 0.
func (r *Roofline) Window() int32 {
	if r.lw == 0 {
		return 0
	}
	return int32(r.A.Window)
}

// KVBytesPerToken is the KV cache bytes one token takes on one rank (with
// PP, on a GPU of the largest stage).
func (r *Roofline) KVBytesPerToken() float64 {
	if r.par != nil && r.par.PP > 1 {
		return r.A.KVBytesPerTokenRank(r.TP) * r.stageLayers() / float64(r.A.Layers)
	}
	return r.A.KVBytesPerTokenRank(r.TP)
}

// KVBytesPerTokenReplica is the KV cache bytes one token takes on a whole
// replica (all its GPUs: what a P/D hand-off moves).
func (r *Roofline) KVBytesPerTokenReplica() float64 {
	return r.A.KVBytesPerTokenRank(r.TP) * float64(r.TP)
}

// WeightBytesPerRank is the weight bytes each rank holds.
func (r *Roofline) WeightBytesPerRank() float64 {
	if r.par != nil {
		return r.parWeightBytesRank()
	}
	return r.A.WeightBytesRank(r.TP)
}

// GPUs is the GPUs of one replica: TP × PP.
func (r *Roofline) GPUs() int {
	if r.par != nil && r.par.PP > 1 {
		return r.TP * r.par.PP
	}
	return r.TP
}

// KVCapacityTokens is how many tokens of KV cache one replica holds when
// the engine may use util of each GPU's memory and runs with batch limits
// lim: (util·memory − weights − reserve) / KV bytes per token, per rank
// (every rank holds a slice of every token). The reserve is vLLM's memory
// profile (MemoryReserve).
func (r *Roofline) KVCapacityTokens(util float64, lim EngineLimits) (int64, error) {
	avail, err := r.kvAvail(util, lim)
	if err != nil {
		return 0, err
	}
	return int64(avail / r.KVBytesPerToken()), nil
}

// kvAvail is the bytes each rank has for KV cache: util·memory − weights −
// reserve (MemoryReserve under the batch limits lim).
func (r *Roofline) kvAvail(util float64, lim EngineLimits) (float64, error) {
	if !(util > 0 && util <= 1) {
		return 0, fmt.Errorf("gpu memory utilization: expected a fraction in (0,1], found %v", util)
	}
	const gib = 1 << 30
	reserve, why := r.MemoryReserve(lim)
	avail := r.G.MemoryGiB*gib*util - r.WeightBytesPerRank() - reserve
	if avail <= 0 {
		return 0, fmt.Errorf("%s on %s tp%d: weights need %.1f GiB per GPU plus %s reserved, more than %.2f × %.1f GiB; raise --tp or lower --weight-dtype",
			r.A.Name, r.G.Name, r.TP, r.WeightBytesPerRank()/gib, why, util, r.G.MemoryGiB)
	}
	return avail, nil
}
