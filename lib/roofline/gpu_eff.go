package roofline

// Efficiency profiles. GEMM, Memory and KernelUS were grid-searched on the
// training half of each GPU's aiconfigurator GEMM table; Attention and
// AttnUS on the training half of its context + generation attention tables
// (shapes split by a hash of n×k or of heads/head_dim/length; the other half
// is held out). Regenerate: go run ./bench/accuracy -calibrate.
// Link 0.40: the ring bus bandwidth the H100 profile has always used. The
// aiconfigurator all-reduce tables (bench/accuracy, message_size counted in
// bf16 elements) put it at 0.62 (H100), 0.69 (H200), 0.64 (A100) and 0.62
// (L40S, PCIe, TP2) for messages of 1 MiB and more, where 0.40 overcharges
// by 33–68%; but it makes the Qwen3-32B TTFT in silicon_sample.csv 4–13
// points worse (too fast already), and gpt-oss too fast, so it stays
// (docs/latency.md, "MoE kernels and the TP step").
// ReserveGiB is 0 in every built-in profile: the memory kept from the KV
// cache is vLLM's profiling run, sized per model, TP and batch limits
// (MemoryReserve, kvreserve.go). A GPU file's reserved_gib > 0 fixes it.
// LayerUS: the elementwise kernels of a layer (2 RMSNorm, rotary, SiLU·mul)
// at ≤64 tokens take 2.4 + 2.4 + 2.7 + 2.7 ≈ 10 µs in the LLMServingSim
// profile (RTX PRO 6000, vLLM 0.19, Llama-3.1-8B dense.csv): launch-bound
// kernels cost about the same on any recent GPU.
// StepUS is 0, TPHostUS 1,700 µs and TPStepUS 0: at low concurrency, where
// a step is one token per request, the measured TPOT of the vLLM
// deployments with TP ≥ 2 and a synchronous scheduler in silicon_sample.csv
// (H100; Qwen3-32B vLLM 0.12, Llama-3.1-70B FP8; C ≤ 8) exceeds this
// roofline's step by 1.6–1.8 ms, without a trend in model size, TP or batch:
// the engine process driving its worker processes each step (broadcast of
// the scheduler output, gather of the results). Single-GPU vLLM runs in one
// process; the dense TP1 run here (RTX 4090) shows no such gap, and the
// H200 gpt-oss TP1 gap (2.5 ms) is its MoE kernel. Async scheduling (vLLM ≥
// 0.14) prepares the next step while the GPU runs: the H100 and H200
// gpt-oss-120b deployments (vLLM 0.18) show no gap once their MoE kernel is
// costed as measured (MXFP4MoE), so it is host time (latency.WithHost).
// SeqStepUS is 35: the engine's per-request CPU work each step (scheduling,
// input preparation, output processing), on the step's path under a
// synchronous scheduler and hidden under async scheduling unless it outlasts
// the GPU step. Fitted on the large-batch TPOT of the synchronous
// deployments of three models (30–40 µs leaving each model out; docs/
// latency.md, "Per-request engine CPU work, adopted").
// TokenizeUS (α1) would be 2.2: a vLLM 0.19 API server tokenises ~500k
// tokens/s on one core (100k tokens in 220 ms; andyluo7, "CPU-GPU Co-Design
// for Agentic LLM Inference", 2026); built-in profiles leave it 0 because the closed-loop harness releases a burst's successors
// together, so a per-request delay only shifts the whole burst past the next
// step start (docs/latency.md, "first-token path").
var h100Eff = Efficiency{
	GEMM: 0.80, Attention: 0.52, Memory: 0.85, Link: 0.4,
	KernelUS: 2.5, AttnUS: 13, LayerUS: 10, StepUS: 0, TPHostUS: 1700, SeqStepUS: 35,
}

// hopperMXFP4MoE {38 µs, 4.9·10^12 weights/s, 0.42}: aiconfigurator's vLLM
// 0.24 MoE tables for gpt-oss-120b's shape on H100 and H200 (Triton MXFP4
// experts, BF16 activations; moe_tp 1–8, 1–16,384 tokens, balanced
// routing), one fit for both: they stream experts at the same rate (665–690
// µs for all 128 experts at TP1), so the kernel is bound by dequantisation,
// not HBM (docs/latency.md, "MoE kernels and the TP step"). Other GPUs run
// other kernels (FlashInfer on Blackwell, Marlin on Ada) and keep the
// grouped-GEMM cost.
var hopperMXFP4MoE = MoEKernel{LayerUS: 38, WeightRate: 4.9, GEMM: 0.42}

// hopperFA3 and pagedFA2 are vLLM's prefill attention kernels (flash.go),
// fitted on the even-hash half of aiconfigurator's context-attention
// tables (heads / KV heads / head_dim / length; head_dim ≤ 256): FA3 on
// H100 (vLLM 0.24), FA2 on A100 (vLLM 0.14) and L40S (vLLM 0.24) together,
// one kernel, one set of constants. Each constant's meaning and the fit:
// docs/latency.md, "Prefill attention: tiles and waves".
var (
	hopperFA3 = FlashKernel{Kernel: "fa3", MMA: 0.93, Softmax: 0.8, CTAUS: 5, FloorUS: 8}
	pagedFA2  = FlashKernel{Kernel: "fa2", MMA: 0.54, Softmax: 0, CTAUS: 2.5, FloorUS: 3}
)

// withFlash is e with a prefill attention kernel.
func withFlash(e Efficiency, k FlashKernel) Efficiency {
	e.Flash = k
	return e
}

// calibratedEff holds profiles fitted on a GPU's own measurements; GPUs
// not listed use h100Eff.
var calibratedEff = map[string]Efficiency{
	// H100's dense-kernel efficiencies (no B200 GEMM tables). TPStepUS
	// 1,100 µs and no MXFP4MoE: the median low-concurrency TPOT gap of the
	// B200 gpt-oss-120b deployments with TP ≥ 2 (vLLM 0.15.1, async: TP2/4/8
	// 0.97 / 1.04 / 1.15 ms; TP1 0.5 ms) is on the step's path, and its
	// cause is not pinned: aiconfigurator's B200 MoE tables measure vLLM
	// 0.19 and 0.24 kernels that would make their TP1 and TP2 TTFT 39–83%
	// too slow (docs/latency.md, "MoE kernels and the TP step").
	"h100":      withFlash(withMoE(h100Eff, hopperMXFP4MoE), hopperFA3),
	"h200":      withFlash(withMoE(h100Eff, hopperMXFP4MoE), hopperFA3),
	"b200":      b200Eff(),
	"a100-80gb": {GEMM: 0.78, Attention: 0.46, Memory: 0.75, Link: 0.4, KernelUS: 6.0, AttnUS: 20, LayerUS: 10, TPHostUS: 1700, SeqStepUS: 35, Flash: pagedFA2},
	"l40s":      {GEMM: 0.60, Attention: 0.44, Memory: 0.75, Link: 0.4, KernelUS: 2.0, AttnUS: 10, LayerUS: 10, TPHostUS: 1700, SeqStepUS: 35, Flash: pagedFA2},
	// GEMM, memory and floor from its own LLMServingSim per-layer profiles
	// (vLLM 0.19, Llama-3.1-8B TP1 and Qwen3-32B TP2 GEMMs, 1–2048 tokens);
	// attention as H100 (no tables). Link 0.25 = 16 GB/s of PCIe Gen5's 64:
	// the LLMServingSim host (its config.json link_bw 16 GB/s, validated
	// within 1% on the run), which the run's own decode and prefill steps
	// bear out (10–14 GB/s left for all-reduce after the per-layer profile;
	// docs/latency.md, "The remaining gaps"): NCCL over PCIe without
	// peer-to-peer. A host with P2P measures ~54 GB/s per direction.
	"rtxpro6000": {GEMM: 0.73, Attention: 0.52, Memory: 0.89, Link: 0.25, KernelUS: 3.5, AttnUS: 13, LayerUS: 10, TPHostUS: 1700, SeqStepUS: 35},
}

// withMoE is e with a measured MXFP4 MoE kernel.
func withMoE(e Efficiency, k MoEKernel) Efficiency {
	e.MXFP4MoE = k
	return e
}

// b200Eff is H100's profile with B200's own TP step on the step's path.
func b200Eff() Efficiency {
	e := h100Eff
	e.TPStepUS, e.TPHostUS = 1100, 0
	return e
}
