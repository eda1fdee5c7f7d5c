package roofline

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/latency"
)

// Parallelism beyond TP (docs/latency.md, "Data, expert and pipeline
// parallelism"): vLLM's --data-parallel-size with --enable-expert-parallel
// for MoE models, and --pipeline-parallel-size. A Roofline without
// SetParallel (or with the zero Parallel) costs steps exactly as before.

// All-to-all backends (vLLM's --all2all-backend).
const (
	AllGatherReduceScatter = "allgather_reducescatter"
	DeepEPHighThroughput   = "deepep_high_throughput"
	DeepEPLowLatency       = "deepep_low_latency"
)

// All2AllBackends lists the backends SetParallel knows.
var All2AllBackends = []string{AllGatherReduceScatter, DeepEPHighThroughput, DeepEPLowLatency}

// Constants of the all-to-all cost, from DeepSeek's DeepEP benchmark
// (github.com/deepseek-ai/DeepEP README, H800 with ~160 GB/s NVLink and one
// CX7 400 Gb/s (~50 GB/s) NIC per GPU, DeepSeek-V3 settings: 4096 tokens
// per batch, hidden 7168, top-8, FP8 dispatch and BF16 combine): the
// normal kernels reach 153 GB/s over NVLink at EP8 (0.956 of the link) and
// 43 GB/s over RDMA at EP16 (0.86 of the NIC).
const (
	a2aNVLinkEff = 153.0 / 160
	a2aRDMAEff   = 43.0 / 50
	// RDMAGBps is one GPU's NIC, per direction (400 Gb/s: DGX H100 and
	// HGX systems have one per GPU); the default of kv_transfer's rdma link.
	RDMAGBps = 50.0
	// rdmaLatUS is one RDMA message's latency (the kv_transfer rdma
	// link's default).
	rdmaLatUS = 20.0
)

// Parallel is a deployment's parallelism besides TP.
type Parallel struct {
	// DP is the data-parallel size: the engines (replicas) whose MoE layers
	// run together. 1 = none.
	DP int
	// EP enables expert parallelism: the routed experts are spread, whole,
	// over the DP × TP GPUs instead of being sharded by TP.
	EP bool
	// PP is the pipeline-parallel size: each replica's layers are split in
	// PP stages on their own GPUs. 1 = none.
	PP int
	// All2All is the dispatch/combine backend with DP > 1 and EP.
	All2All string
	// RedundantExperts are EPLB's extra expert replicas (vLLM
	// --eplb-config num_redundant_experts).
	RedundantExperts int
	// GPUsPerNode is the NVLink domain: all-to-all traffic to a GPU of
	// another node goes over RDMA.
	GPUsPerNode int
}

// On reports whether p changes anything.
func (p Parallel) On() bool { return p.DP > 1 || p.EP || p.PP > 1 }

// par is a Roofline's parallel state (nil: TP only).
type par struct {
	Parallel
	n        int     // EP degree: DP × TP (0 without EP)
	localExp float64 // experts per GPU with EP
	epGemms  []gemm  // one whole routed expert (EP)
	dpGemms  []gemm  // one routed expert sharded over DP × TP (DP without EP)
}

// SetParallel adds DP, EP and PP to the roofline. Its errors name no key:
// callers name theirs.
func (r *Roofline) SetParallel(p Parallel) error {
	if p.DP < 1 {
		p.DP = 1
	}
	if p.PP < 1 {
		p.PP = 1
	}
	if p.GPUsPerNode < 1 {
		p.GPUsPerNode = 8
	}
	if p.All2All == "" {
		p.All2All = AllGatherReduceScatter
	}
	a := r.A
	switch {
	case !p.On():
		r.par = nil
		return nil
	case p.EP && !a.MoE():
		return fmt.Errorf("expert_parallel needs a mixture-of-experts model; %s has no routed experts", a.Name)
	case p.RedundantExperts < 0:
		return fmt.Errorf("redundant_experts: expected >= 0, found %d", p.RedundantExperts)
	case p.RedundantExperts > 0 && !p.EP:
		return fmt.Errorf("redundant_experts (EPLB) needs expert_parallel")
	case p.PP > a.Layers:
		return fmt.Errorf("pp %d: more pipeline stages than %s's %d layers", p.PP, a.Name, a.Layers)
	}
	switch p.All2All {
	case AllGatherReduceScatter, DeepEPHighThroughput, DeepEPLowLatency:
	default:
		return fmt.Errorf("all2all_backend: expected one of %v, found %q", All2AllBackends, p.All2All)
	}
	x := &par{Parallel: p}
	if a.MoE() {
		e := float64(a.ExpertIntermediate)
		wq, fq := a.WeightDtype.Bytes(), r.G.PeakTFLOPS(a.Math())*1e12*r.G.Eff.GEMM
		if p.EP {
			x.n = p.DP * r.TP
			slots := a.Experts + p.RedundantExperts
			if slots%x.n != 0 {
				return fmt.Errorf("the EP degree dp × tp = %d × %d = %d does not divide %s's %d routed experts%s (vLLM then gives the first %d ranks one expert more; the simulator costs equal shares: pick a dp × tp dividing it, or add redundant_experts)",
					p.DP, r.TP, x.n, a.Name, a.Experts, redundantNote(p.RedundantExperts), slots%x.n)
			}
			x.localExp = float64(slots / x.n)
			x.epGemms = []gemm{{2 * e, float64(a.Hidden), wq, fq}, {float64(a.Hidden), e, wq, fq}}
		} else if p.DP > 1 {
			t := float64(p.DP * r.TP)
			x.dpGemms = []gemm{{2 * e / t, float64(a.Hidden), wq, fq}, {float64(a.Hidden), e / t, wq, fq}}
		}
	}
	r.par = x
	r.name = fmt.Sprintf("roofline:%s/%s/tp%d", a.Name, r.G.Name, r.TP)
	if p.DP > 1 {
		r.name += fmt.Sprintf("/dp%d", p.DP)
	}
	if p.EP {
		r.name += "/ep"
	}
	if p.PP > 1 {
		r.name += fmt.Sprintf("/pp%d", p.PP)
	}
	return nil
}

func redundantNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" + %d redundant", n)
}

// Parallelism returns the roofline's parallelism besides TP (the zero
// Parallel when none).
func (r *Roofline) Parallelism() Parallel {
	if r.par == nil {
		return Parallel{}
	}
	return r.par.Parallel
}

// routedExperts adds the routed experts of a MoE step of T tokens on one
// rank when DP or EP changes them (reports false otherwise). With DP the
// replicas' MoE layers run together: the group's T_g = DP × T tokens (the
// router keeps the ranks' batches alike; a rank's step is not stretched to
// its slowest peer's). EP: each GPU holds E_loc = (E + R) / (DP·TP) whole
// experts and computes T_g·k / (DP·TP) token-expert rows over the
// E_loc·(1 − (1 − k/E)^T_g) it expects to be touched. DP without EP: the
// experts are sharded over the DP·TP GPUs (vLLM's default), each GPU
// computing all T_g·k rows on its slice.
func (r *Roofline) routedExperts(t *Terms, T float64) bool {
	x := r.par
	if x == nil || x.DP == 1 && !x.EP {
		return false
	}
	a := r.A
	lm := float64(a.MoELayers)
	k := float64(a.ExpertsPerTok)
	Tg := float64(x.DP) * T
	var rows, touched float64
	var gs []gemm
	if x.EP {
		rows = Tg * k / float64(x.n)
		touched = x.localExp * (1 - math.Pow(1-k/float64(a.Experts), Tg))
		gs = x.epGemms
	} else {
		rows = Tg * k
		touched = ExpectedExperts(a.Experts, a.ExpertsPerTok, Tg)
		gs = x.dpGemms
	}
	if r.moe.on() {
		r.moeKernelCostOf(t, gs, rows, touched, lm)
	} else {
		for _, g := range gs {
			r.gemmCost(t, rows, g, lm, touched)
		}
	}
	return true
}

// a2aUS adds the MoE layers' dispatch and combine between the DP ranks
// (none with DP = 1: the TP all-reduce already combines). Per MoE layer,
// for a step of T tokens per rank:
//   - allgather_reducescatter (vLLM's default): an all-gather of the
//     ranks' hidden states and a reduce-scatter of the outputs, each
//     moving (DP − 1)·T·h·a bytes into (out of) a GPU;
//   - deepep_*: each GPU sends its T/TP tokens to the GPUs of their k
//     experts, FP8 (1 byte per element) out and BF16 back, the fraction
//     (n − 1)/n of copies that leave it; of those, the ones for its own
//     node (min(n, G) − 1)/n go over NVLink, the rest over its NIC.
//
// Each transfer takes latency + bytes / achieved bandwidth; NVLink and
// RDMA run in parallel. Without DP the ranks exchange nothing: with DP but
// no EP the experts' shards need the same gather and scatter.
func (r *Roofline) a2aUS(t *Terms, T float64) {
	x := r.par
	if x == nil || x.DP == 1 {
		return
	}
	a := r.A
	h := float64(a.Hidden)
	lm := float64(a.MoELayers)
	if lm == 0 {
		return
	}
	if !x.EP || x.All2All == AllGatherReduceScatter {
		nvl := r.G.LinkGBps * 1e9 * a2aNVLinkEff
		rdma := RDMAGBps * 1e9 * a2aRDMAEff
		G := x.GPUsPerNode
		// Ranks = DP engines of TP GPUs: a GPU's peers in the gather are
		// the same TP rank of the other engines; those on its node share
		// NVLink, the others its NIC.
		ranks := x.DP
		perNode := max(1, G/r.TP) // engines per node
		on := float64(min(ranks, perNode) - 1)
		off := float64(ranks) - 1 - on
		msg := T * h * r.ab // one engine's hidden states
		one := r.a2aTime(on*msg, off*msg, nvl, rdma)
		t.CommBytes += 2 * (on + off) * msg * lm
		t.CommUS += 2 * one * lm
		return
	}
	for _, eb := range []float64{1, 2} { // FP8 dispatch, BF16 combine
		us, by := r.deepEP(T, eb)
		t.CommBytes += by * lm
		t.CommUS += us * lm
	}
}

// deepEP is one DeepEP dispatch (eb = 1: FP8) or combine (eb = 2: BF16) of
// a layer for T tokens per rank: its time and the bytes leaving a GPU.
func (r *Roofline) deepEP(T, eb float64) (us, bytes float64) {
	x := r.par
	n := float64(x.n)
	G := x.GPUsPerNode
	copies := T / float64(r.TP) * float64(r.A.ExpertsPerTok) * float64(r.A.Hidden) * eb
	on := float64(min(x.n, G)-1) / n
	off := (n - float64(min(x.n, G))) / n
	return r.a2aTime(copies*on, copies*off, r.G.LinkGBps*1e9*a2aNVLinkEff, RDMAGBps*1e9*a2aRDMAEff), copies * (on + off)
}

// a2aTime is one exchange: on-node bytes over NVLink and off-node bytes
// over RDMA, in parallel, each with its latency.
func (r *Roofline) a2aTime(onBytes, offBytes, nvl, rdma float64) float64 {
	var us float64
	if onBytes > 0 {
		us = r.G.LinkLatUS + onBytes/nvl*1e6
	}
	if offBytes > 0 {
		us = math.Max(us, rdmaLatUS+offBytes/rdma*1e6)
	}
	return us
}

// pipelined costs a step with PP stages: vLLM V1 keeps up to PP batches in
// flight (max_concurrent_batches), so the running requests advance in m =
// min(PP, sequences) micro-batches, each through every stage. The step (the
// time for every request to advance one token) is then one micro-batch's
// traversal of the whole model, P stages × (its work on L/P layers) = the
// model's cost over T/m tokens, plus its P − 1 hops of T/m hidden states to
// the next stage's GPU. Compute-bound steps run P times faster; a
// memory-bound decode reads each stage's weights once per micro-batch, so
// it gains nothing: the known trade of PP.
func (r *Roofline) pipelined(t *Terms, b *latency.Batch) {
	x := r.par
	seqs := b.PrefillSeqs + b.DecodeSeqs
	m := int64(min(x.PP, max(seqs, 1)))
	div := func(v int64) int64 { return (v + m - 1) / m }
	mb := latency.Batch{PrefillSeqs: int(div(int64(b.PrefillSeqs))), PrefillTokens: div(b.PrefillTokens),
		PrefillCtx: div(b.PrefillCtx), PrefillAttn: div(b.PrefillAttn), DecodeSeqs: int(div(int64(b.DecodeSeqs))),
		DecodeCtx: div(b.DecodeCtx), PrefillImages: b.PrefillImages}
	if r.lw > 0 {
		pw, cw, dw := r.windowed(b) // of the whole batch, then split
		mb.PrefillAttnW, mb.PrefillCtxW, mb.DecodeCtxW = div(pw), div(cw), div(dw)
	}
	r.terms(t, &mb)
	if T := float64(mb.PrefillTokens) + float64(mb.DecodeSeqs); T > 0 {
		msg := T * float64(r.A.Hidden) * r.ab
		hops := float64(x.PP - 1)
		t.CommBytes += hops * msg
		t.CommUS += hops * (r.G.LinkLatUS + msg/(r.G.LinkGBps*1e9*r.G.Eff.Link)*1e6)
		t.TotalUS = t.RoofUS + t.CommUS + t.OverheadUS
	}
}

// stageLayers is the layers of the largest pipeline stage.
func (r *Roofline) stageLayers() float64 {
	if r.par == nil || r.par.PP <= 1 {
		return float64(r.A.Layers)
	}
	return math.Ceil(float64(r.A.Layers) / float64(r.par.PP))
}

// parWeightBytesRank is the weight bytes one GPU holds with DP, EP or PP:
// the largest stage's share of the layers, the embedding or LM head (on
// the first or last stage), and with EP E_loc whole experts per MoE layer
// instead of 1/TP of each.
func (r *Roofline) parWeightBytesRank() float64 {
	a := r.A
	x := r.par
	tp := float64(r.TP)
	act := a.ActDtype.Bytes()
	attn := float64(a.Layers) * a.AttnParams() * a.AttnDtype().Bytes()
	router := float64(a.MoELayers) * a.RouterParams() * act
	embed := a.EmbedParams() * act
	experts := float64(a.MoELayers) * float64(a.Experts) * a.ExpertParams() * a.WeightDtype.Bytes()
	rest := (a.TotalParams()-float64(a.Layers)*a.AttnParams()-float64(a.MoELayers)*a.RouterParams()-a.EmbedParams())*a.WeightDtype.Bytes() - experts
	layers := (attn+router+rest)/tp + experts/tp
	switch {
	case x.EP:
		layers = (attn+router+rest)/tp + float64(a.MoELayers)*x.localExp*a.ExpertParams()*a.WeightDtype.Bytes()
	case x.DP > 1:
		layers = (attn+router+rest)/tp + experts/(tp*float64(x.DP))
	}
	frac := r.stageLayers() / float64(a.Layers)
	if x.PP > 1 && !a.TiedEmbed {
		embed /= 2 // the embedding on the first stage, the LM head on the last
	}
	return layers*frac + embed/tp
}
