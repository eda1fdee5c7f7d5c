package roofline

// h100Eff is the efficiency profile calibrated on H100 SXM kernel tables
// (see docs/latency.md "Calibration"); GPUs without their own tables use it.
var h100Eff = Efficiency{
	GEMM: 0.7, Attention: 0.5, Memory: 0.8, Link: 0.4,
	KernelUS: 4, LayerUS: 0, StepUS: 0,
	// LLMServingSim RTX 4090 run (Llama-3.1-8B, util 0.9): 23.5 GiB·0.9 −
	// 16.06 GB weights − 41,408 KV tokens·128 KiB leaves 1.16 GiB for
	// activations and the CUDA context.
	ReserveGiB: 1.2,
}

// calibratedEff holds profiles fitted on a GPU's own kernel tables.
var calibratedEff = map[string]Efficiency{}
