package roofline

// Efficiency profiles. GEMM, Memory and KernelUS were grid-searched on the
// training half of each GPU's aiconfigurator GEMM table; Attention and
// AttnUS on the training half of its context + generation attention tables
// (shapes split by a hash of n×k or of heads/head_dim/length; the other half
// is held out). Regenerate: go run ./bench/accuracy -calibrate.
// Link: H100 NCCL / vLLM custom all-reduce tables, 16–128 MiB messages reach
// 35–50% of the 450 GB/s NVLink figure as ring bus bandwidth.
// ReserveGiB: LLMServingSim RTX 4090 run (Llama-3.1-8B, util 0.9): 23.5 GiB·0.9
// − 16.06 GB weights − 41,408 KV tokens·128 KiB leaves 1.16 GiB for
// activations and the CUDA context.
// LayerUS: the elementwise kernels of a layer (2 RMSNorm, rotary, SiLU·mul)
// at ≤64 tokens take 2.4 + 2.4 + 2.7 + 2.7 ≈ 10 µs in the LLMServingSim
// profile (RTX PRO 6000, vLLM 0.19, Llama-3.1-8B dense.csv): launch-bound
// kernels cost about the same on any recent GPU.
// StepUS is 0: engine CPU time per step (scheduling, input preparation) is
// in none of these tables, so the roofline does not invent it; fitted
// coefficients carry it as their const term.
var h100Eff = Efficiency{
	GEMM: 0.80, Attention: 0.52, Memory: 0.85, Link: 0.4,
	KernelUS: 2.5, AttnUS: 13, LayerUS: 10, StepUS: 0,
	ReserveGiB: 1.2,
}

// calibratedEff holds profiles fitted on a GPU's own kernel tables; GPUs
// not listed use h100Eff.
var calibratedEff = map[string]Efficiency{
	"a100-80gb": {GEMM: 0.78, Attention: 0.46, Memory: 0.75, Link: 0.4, KernelUS: 6.0, AttnUS: 20, LayerUS: 10, ReserveGiB: 1.2},
	"l40s":      {GEMM: 0.60, Attention: 0.44, Memory: 0.75, Link: 0.4, KernelUS: 2.0, AttnUS: 10, LayerUS: 10, ReserveGiB: 1.2},
}
