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
// by 33–68%; but applied alone that made every gpt-oss TTFT in
// silicon_sample.csv 3–18 points worse (its MoE prefill is already too fast
// for another reason), so it waits for a fix of that (docs/latency.md).
// ReserveGiB: LLMServingSim RTX 4090 run (Llama-3.1-8B, util 0.9): 23.5 GiB·0.9
// − 16.06 GB weights − 41,408 KV tokens·128 KiB leaves 1.16 GiB for
// activations and the CUDA context.
// LayerUS: the elementwise kernels of a layer (2 RMSNorm, rotary, SiLU·mul)
// at ≤64 tokens take 2.4 + 2.4 + 2.7 + 2.7 ≈ 10 µs in the LLMServingSim
// profile (RTX PRO 6000, vLLM 0.19, Llama-3.1-8B dense.csv): launch-bound
// kernels cost about the same on any recent GPU.
// StepUS is 0 and TPStepUS 1,700 µs: at low concurrency, where a step is
// one token per request, the measured TPOT of every vLLM deployment with
// TP ≥ 2 in silicon_sample.csv (H100, H200, B200; Qwen3-32B, Llama-3.1-70B
// FP8, gpt-oss-120b; vLLM 0.12–0.18; 19 deployments, C ≤ 8) exceeds this
// roofline's step by a median 1.76 ms (TP2 1.57, TP4 1.76, TP8 1.74; B200
// with vLLM 0.15 lowest at 1.1–1.2), without a trend in model size, TP or
// batch. Single-GPU vLLM runs in one process (no per-step broadcast to
// workers and gather of their outputs); the one TP1 vLLM run here (RTX 4090)
// shows no such gap, so it is charged to TP > 1 only.
// SeqStepUS is 0: ~40 µs per request per step fits the synchronous vLLM
// 0.12 H100 points' large-batch TPOT but worsens their TTFT, so it stays a
// GPU YAML setting (docs/latency.md, "The remaining gaps", item 2).
// TokenizeUS (α1) would be 2.2: a vLLM 0.19 API server tokenises ~500k
// tokens/s on one core (100k tokens in 220 ms; andyluo7, "CPU-GPU Co-Design
// for Agentic LLM Inference", 2026); built-in profiles leave it 0 because the closed-loop harness releases a burst's successors
// together, so a per-request delay only shifts the whole burst past the next
// step start (docs/latency.md, "first-token path").
var h100Eff = Efficiency{
	GEMM: 0.80, Attention: 0.52, Memory: 0.85, Link: 0.4,
	KernelUS: 2.5, AttnUS: 13, LayerUS: 10, StepUS: 0, TPStepUS: 1700,
	ReserveGiB: 1.2,
}

// calibratedEff holds profiles fitted on a GPU's own kernel tables; GPUs
// not listed use h100Eff.
var calibratedEff = map[string]Efficiency{
	"a100-80gb": {GEMM: 0.78, Attention: 0.46, Memory: 0.75, Link: 0.4, KernelUS: 6.0, AttnUS: 20, LayerUS: 10, TPStepUS: 1700, ReserveGiB: 1.2},
	"l40s":      {GEMM: 0.60, Attention: 0.44, Memory: 0.75, Link: 0.4, KernelUS: 2.0, AttnUS: 10, LayerUS: 10, TPStepUS: 1700, ReserveGiB: 1.2},
	// GEMM, memory and floor from its own LLMServingSim per-layer profiles
	// (vLLM 0.19, Llama-3.1-8B TP1 and Qwen3-32B TP2 GEMMs, 1–2048 tokens);
	// attention as H100 (no tables). Link 0.25 = 16 GB/s of PCIe Gen5's 64:
	// the LLMServingSim host (its config.json link_bw 16 GB/s, validated
	// within 1% on the run), which the run's own decode and prefill steps
	// bear out (10–14 GB/s left for all-reduce after the per-layer profile;
	// docs/latency.md, "The remaining gaps"): NCCL over PCIe without
	// peer-to-peer. A host with P2P measures ~54 GB/s per direction.
	"rtxpro6000": {GEMM: 0.73, Attention: 0.52, Memory: 0.89, Link: 0.25, KernelUS: 3.5, AttnUS: 13, LayerUS: 10, TPStepUS: 1700, ReserveGiB: 1.2},
}
