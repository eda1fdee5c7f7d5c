package roofline

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/yamlcheck"
)

// GPU is one accelerator: vendor peaks plus the efficiency profile that turns
// peaks into achieved rates. Users add one with a YAML file of this shape
// (see docs/latency.md).
type GPU struct {
	Name       string   `yaml:"name"`
	Aliases    []string `yaml:"aliases,omitempty"`
	BF16TFLOPS float64  `yaml:"bf16_tflops"`          // dense tensor-core peak, no sparsity
	FP8TFLOPS  float64  `yaml:"fp8_tflops,omitempty"` // 0: no FP8 tensor cores (FP8 weights run as W8A16)
	FP4TFLOPS  float64  `yaml:"fp4_tflops,omitempty"` // 0: no FP4 tensor cores
	HBMTBps    float64  `yaml:"hbm_tb_s"`             // memory bandwidth, 10^12 B/s
	MemoryGiB  float64  `yaml:"memory_gib"`           // device memory, 2^30 B
	LinkGBps   float64  `yaml:"link_gb_s"`            // TP interconnect, per GPU per direction, 10^9 B/s
	LinkLatUS  float64  `yaml:"link_latency_us"`      // small-message all-reduce time, µs
	// HostLinkGBps is the GPU's link to host memory, per direction, 10^9
	// B/s (PCIe, or NVLink-C2C on Grace parts): the default bandwidth of a
	// CPU KV tier. 0 = unknown (a CPU tier must then give bandwidth_gb_s).
	HostLinkGBps float64 `yaml:"host_link_gb_s,omitempty"`
	// The chip's parallelism, for kernels costed by tiles and waves
	// (efficiency.prefill_attention): streaming multiprocessors, the clock
	// the datasheet's tensor peak is quoted at, and shared memory per SM.
	// 0 = unknown.
	SMs      int        `yaml:"sms,omitempty"`
	ClockMHz float64    `yaml:"clock_mhz,omitempty"`
	SmemKiB  float64    `yaml:"smem_kib,omitempty"`
	Eff      Efficiency `yaml:"efficiency"`
	Source   string     `yaml:"source,omitempty"`
}

// Efficiency converts peaks into achieved rates and adds fixed costs. These
// are data: the built-in values are calibrated (see each GPU's comment) and a
// GPU YAML file can override them.
type Efficiency struct {
	GEMM       float64 `yaml:"gemm"`                           // achieved / peak tensor FLOP/s on large GEMMs
	Attention  float64 `yaml:"attention"`                      // achieved / peak FLOP/s in prefill attention
	Memory     float64 `yaml:"memory"`                         // achieved / peak HBM bandwidth on streaming reads
	Link       float64 `yaml:"link"`                           // achieved / peak link bandwidth in all-reduce (ring bus bandwidth)
	KernelUS   float64 `yaml:"kernel_us"`                      // floor per GEMM kernel (launch, tail, small tiles)
	AttnUS     float64 `yaml:"attention_kernel_us"`            // floor per attention kernel (scheduler metadata, split-KV combine)
	LayerUS    float64 `yaml:"layer_overhead_us"`              // per layer: norms, rope, activation, residual kernels
	StepUS     float64 `yaml:"step_overhead_us"`               // per step: scheduling, sampling, input preparation
	TPStepUS   float64 `yaml:"tp_step_overhead_us"`            // per step when TP > 1, on the step's critical path under either scheduler
	TPHostUS   float64 `yaml:"tp_host_overhead_us,omitempty"`  // per step when TP > 1: the engine's CPU work to drive its worker processes (broadcast, gather); added by a synchronous scheduler, overlapped by async scheduling
	SeqStepUS  float64 `yaml:"seq_step_overhead_us,omitempty"` // per request in the batch per step: the engine's per-request CPU work (input preparation, output processing)
	TokenizeUS float64 `yaml:"tokenize_us"`                    // per prompt token before the request is queued (α1: tokenisation in the API server)
	ReserveGiB float64 `yaml:"reserved_gib"`                   // memory per GPU kept from the KV cache besides weights; 0: vLLM's profiling run (MemoryReserve)
	// MXFP4MoE is the measured cost of the routed-expert kernel for MXFP4
	// (4-bit weights, BF16 activations) MoE layers; zero: those experts
	// are costed as grouped GEMMs like any other.
	MXFP4MoE MoEKernel `yaml:"mxfp4_moe,omitempty"`
	// Flash costs prefill attention by the FlashAttention kernel's tiles
	// and waves (flash.go); zero: by FLOPs and bytes at Attention.
	Flash FlashKernel `yaml:"prefill_attention,omitempty"`
}

// MoEKernel costs one MoE layer's routed experts on one rank, T tokens, k
// experts each, E of them touched, W weights per expert per rank:
// LayerUS + max(2·T·k·W / (BF16 peak · GEMM), E·W / WeightRate). The weight
// term is a rate of weights, not of bytes: a kernel that dequantises in
// registers streams its experts at the same speed on H100 and H200.
type MoEKernel struct {
	LayerUS    float64 `yaml:"layer_us"`    // fixed per MoE layer (routing, permutation, launches)
	WeightRate float64 `yaml:"weight_rate"` // expert weights processed per second, 10^12
	GEMM       float64 `yaml:"gemm"`        // achieved / BF16 peak on many tokens
}

// on reports whether the kernel is described (both rates given).
func (k MoEKernel) on() bool { return k.WeightRate > 0 && k.GEMM > 0 }

// Built-in GPUs. Peaks are dense (no 2:4 sparsity). Efficiency profiles are
// in gpu_eff.go.
var GPUs = []GPU{
	// NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 1,979 TFLOPS with
	// sparsity → 989.5 dense; FP8 3,958 → 1,979 dense; HBM3 3.35 TB/s; 80 GB
	// (driver reports 81,559 MiB = 79.6 GiB, of which CUDA gives a process
	// 79.19 GiB: torch.cuda.mem_get_info's total, which vLLM sizes the KV
	// cache from; 31 published vLLM start-up logs, lib/roofline/testdata/
	// vllm_kv_memory.csv); NVLink 900 GB/s bidirectional
	// → 450 per direction. Link latency: vLLM custom all-reduce, 128 B, TP2–8,
	// 4.3–4.7 µs (aiconfigurator h100_sxm custom_allreduce_perf).
	// PCIe Gen5 x16 host link: datasheet "PCIe Gen5: 128 GB/s" (bidirectional) → 64 per direction.
	// NVIDIA H100 Tensor Core GPU Architecture whitepaper: SXM5 has 132 SMs
	// with 228 KB shared memory each; its dense FP16/BF16 tensor peak,
	// 989.4 TFLOPS, is 132 SMs × 4,096 FLOP/clock at 1,830 MHz.
	{Name: "h100", Aliases: []string{"h100-sxm", "h100_sxm", "h100-80gb", "H100"},
		BF16TFLOPS: 989.5, FP8TFLOPS: 1979, HBMTBps: 3.35, MemoryGiB: 79.19, LinkGBps: 450, LinkLatUS: 4.5, HostLinkGBps: 64,
		SMs: 132, ClockMHz: 1830, SmemKiB: 228,
		Eff: defaultEff(), Source: "NVIDIA H100 Tensor Core GPU datasheet (SXM5)"},
	// NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 1,979 sparse → 989.5;
	// FP8 3,958 → 1,979; HBM3e 4.8 TB/s; 141 GB (driver 143,771 MiB = 140.4
	// GiB, of which CUDA gives a process 139.81 GiB: torch's total, which
	// vLLM sizes the KV cache from, as public vLLM start-up logs print it,
	// "total_gpu_memory (139.81GiB)", and PyTorch OOM messages from 8×H200
	// nodes, 139.80–139.81); NVLink 900 GB/s bidirectional → 450.
	// PCIe Gen5 x16 host link: datasheet "PCIe Gen5: 128 GB/s" → 64 per direction.
	// SMs, clock and shared memory: the H100 SXM5's (the same GH100 die).
	{Name: "h200", Aliases: []string{"h200-sxm", "h200_sxm", "H200"},
		BF16TFLOPS: 989.5, FP8TFLOPS: 1979, HBMTBps: 4.8, MemoryGiB: 139.81, LinkGBps: 450, LinkLatUS: 4.5, HostLinkGBps: 64,
		SMs: 132, ClockMHz: 1830, SmemKiB: 228,
		Eff: defaultEff(), Source: "NVIDIA H200 Tensor Core GPU datasheet (SXM)"},
	// NVIDIA HGX B200 datasheet, per GPU (8-GPU totals / 8): FP4 18 PFLOPS
	// sparse → 9 dense; FP8 9 sparse → 4.5 dense; BF16 4.5 sparse → 2.25
	// dense; HBM3e 8 TB/s; 180 GB (the driver reports 183,359 MiB = 179.06
	// GiB, of which CUDA gives a process 178.35 GiB: torch's total, which
	// vLLM sizes the KV cache from, in PyTorch OOM messages from 8×B200
	// nodes, 178.35–178.36); NVLink 5 1.8 TB/s
	// bidirectional → 900. Latency assumed equal to NVLink 4 (no table).
	// Host link: PCIe Gen5 x16 on HGX B200 boards (datasheet "PCIe Gen5 128 GB/s" per GPU) → 64 per direction.
	{Name: "b200", Aliases: []string{"b200-sxm", "b200_sxm", "B200"},
		BF16TFLOPS: 2250, FP8TFLOPS: 4500, FP4TFLOPS: 9000, HBMTBps: 8, MemoryGiB: 178.35, LinkGBps: 900, LinkLatUS: 4.5, HostLinkGBps: 64,
		Eff: defaultEff(), Source: "NVIDIA HGX B200 datasheet (per-GPU share)"},
	// NVIDIA GB200 NVL72 specifications, per GPU (72-GPU totals / 72): FP4
	// 1,440 PFLOPS sparse → 10,000 dense; FP8 720 → 5,000 dense; BF16 360 →
	// 2,500 dense; HBM3e 576 TB/s → 8 TB/s; 13.4 TB → 186 GB (the driver
	// reports 189,471 MiB = 185.03 GiB, of which CUDA gives a process
	// 184.31 GiB: torch's total in PyTorch OOM messages from GB200 nodes);
	// NVLink 5 1.8 TB/s bidirectional → 900. Latency assumed as NVLink 4.
	// Host link: NVLink-C2C, 900 GB/s bidirectional per superchip (one Grace, two Blackwell GPUs) → 450 per direction shared by two GPUs = 225 each.
	{Name: "gb200", Aliases: []string{"GB200", "gb200-nvl72"},
		BF16TFLOPS: 2500, FP8TFLOPS: 5000, FP4TFLOPS: 10000, HBMTBps: 8, MemoryGiB: 184.31, LinkGBps: 900, LinkLatUS: 4.5, HostLinkGBps: 225,
		Eff: defaultEff(), Source: "NVIDIA GB200 NVL72 specifications (per-GPU share)"},
	// NVIDIA A100 Tensor Core GPU datasheet (80GB SXM): BF16 312 dense; no
	// FP8; HBM2e 2,039 GB/s; 80 GB (driver 81,920 MiB = 80 GiB, of which
	// CUDA gives a process 79.25 GiB: torch's total, as a public vLLM log
	// prints it, "total_gpu_memory (79.25GiB)", and PyTorch OOM messages on
	// A100 80GB nodes, e.g. github.com/wbfwonderful/Vad-R1 issue 11); NVLink 3 600 GB/s
	// bidirectional → 300. Latency: aiconfigurator a100 vLLM custom
	// all-reduce (CUDA graph), ≤1 KiB, TP2–4: 4.9–5.2 µs.
	// Host link: datasheet "PCIe Gen4: 64 GB/s" → 32 per direction.
	// NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs, 164 KB
	// shared memory per SM, boost 1,410 MHz (108 × 2,048 FLOP/clock × 1.41
	// GHz = 312 TFLOPS).
	{Name: "a100-80gb", Aliases: []string{"a100", "a100-sxm", "a100_sxm", "a100-80", "A100-80", "A100-SXM"},
		BF16TFLOPS: 312, HBMTBps: 2.039, MemoryGiB: 79.25, LinkGBps: 300, LinkLatUS: 5, HostLinkGBps: 32,
		SMs: 108, ClockMHz: 1410, SmemKiB: 164,
		Eff: defaultEff(), Source: "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM)"},
	// NVIDIA L40S datasheet: BF16 733 sparse → 362.05 dense (upstream BLIS
	// lists FP8 1,466, which is the sparse figure); FP8 1,466 → 733 dense;
	// GDDR6 864 GB/s; 48 GB (driver 46,068 MiB = 45 GiB, of which CUDA
	// gives a process 44.31 GiB: torch's total in a public vLLM start-up log
	// on an L40S, "total_gpu_memory (44.31GiB)"; an L40, with the same
	// 46,068 MiB, prints 44.39); no NVLink: PCIe
	// Gen4 x16 64 GB/s bidirectional → 32. Latency: aiconfigurator l40s NCCL
	// all-reduce, TP2, 0.5–2 KiB: 6–6.5 µs.
	// Host link: PCIe Gen4 x16, 64 GB/s bidirectional → 32.
	// L40S datasheet: 18,176 CUDA cores = 142 SMs, boost 2,520 MHz; Ada
	// tuning guide (compute capability 8.9): 100 KB shared memory per SM.
	{Name: "l40s", Aliases: []string{"L40S"},
		BF16TFLOPS: 362.05, FP8TFLOPS: 733, HBMTBps: 0.864, MemoryGiB: 44.31, LinkGBps: 32, LinkLatUS: 6.5, HostLinkGBps: 32,
		SMs: 142, ClockMHz: 2520, SmemKiB: 100,
		Eff: defaultEff(), Source: "NVIDIA L40S datasheet"},
	// NVIDIA Ada GPU architecture whitepaper, Appendix A (GeForce RTX 4090):
	// BF16 tensor with FP32 accumulate 165.2 dense; FP8 (FP32 acc.) 330.3;
	// GDDR6X 1,008 GB/s; 24 GB (driver 25,250,627,584 B = 23.5 GiB, from the
	// LLMServingSim meta.json); PCIe Gen4 x16 → 32 GB/s per direction;
	// latency taken from the L40S NCCL table (also PCIe Gen4, no NVLink).
	// Host link: PCIe Gen4 x16 → 32 per direction.
	// Same whitepaper: 128 SMs, boost 2,520 MHz; Ada tuning guide: 100 KB
	// shared memory per SM.
	{Name: "rtx4090", Aliases: []string{"rtx-4090", "RTX4090"},
		BF16TFLOPS: 165.2, FP8TFLOPS: 330.3, HBMTBps: 1.008, MemoryGiB: 23.5, LinkGBps: 32, LinkLatUS: 6.5, HostLinkGBps: 32,
		SMs: 128, ClockMHz: 2520, SmemKiB: 100,
		Eff: defaultEff(), Source: "NVIDIA Ada GPU architecture whitepaper, Appendix A"},
	// NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet: 4 PFLOPS FP4 AI
	// TOPS (sparse) → FP4 2,000 dense, FP8 1,000, BF16 500 (each precision
	// halves the rate); GDDR7 1,597 GB/s; 96 GB (94.5 GiB usable assumed,
	// as for other 96 GB cards); PCIe Gen5 x16 → 64 GB/s; latency as L40S.
	// Host link: PCIe Gen5 x16 → 64 per direction.
	{Name: "rtxpro6000", Aliases: []string{"rtx-pro-6000", "RTXPRO6000"},
		BF16TFLOPS: 500, FP8TFLOPS: 1000, FP4TFLOPS: 2000, HBMTBps: 1.597, MemoryGiB: 94.5, LinkGBps: 64, LinkLatUS: 6.5, HostLinkGBps: 64,
		Eff: defaultEff(), Source: "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet"},
}

// defaultEff is the H100 calibration (see gpu_eff.go), applied to GPUs that
// have no kernel tables of their own.
func defaultEff() Efficiency { return h100Eff }

// LookupGPU finds a built-in GPU by name or alias (case-insensitive).
func LookupGPU(name string) (GPU, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, g := range GPUs {
		if strings.ToLower(g.Name) == n {
			return withEff(g), true
		}
		for _, a := range g.Aliases {
			if strings.ToLower(a) == n {
				return withEff(g), true
			}
		}
	}
	return GPU{}, false
}

func withEff(g GPU) GPU {
	if e, ok := calibratedEff[g.Name]; ok {
		g.Eff = e
	}
	return g
}

// GPUNames lists the built-in names, sorted.
func GPUNames() []string {
	out := make([]string, 0, len(GPUs))
	for _, g := range GPUs {
		out = append(out, g.Name)
	}
	sort.Strings(out)
	return out
}

// LoadGPU returns a built-in GPU by name, or reads a GPU YAML file.
func LoadGPU(name string) (GPU, error) {
	if g, ok := LookupGPU(name); ok {
		return g, nil
	}
	if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
		msg := fmt.Sprintf("gpu %q: not built in (%s); give a .yaml file to add one", name, strings.Join(GPUNames(), ", "))
		if s := yamlcheck.Suggest(name, GPUNames()); s != "" {
			msg = fmt.Sprintf("did you mean %s? (%s)", s, msg)
		}
		return GPU{}, errors.New(msg)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return GPU{}, fmt.Errorf("gpu %q: %w", name, err)
	}
	return ParseGPU(name, data)
}

// ParseGPU decodes and validates a GPU YAML document. Unset efficiency
// fields take the H100 calibration.
func ParseGPU(path string, data []byte) (GPU, error) {
	g := GPU{Eff: defaultEff()}
	if err := yamlcheck.Decode(path, data, &g); err != nil {
		if errors.Is(err, io.EOF) {
			return GPU{}, fmt.Errorf("%s: empty file, expected a GPU YAML document", path)
		}
		return GPU{}, err
	}
	return g, g.Validate(path)
}

// Validate names the first field that is out of range.
func (g *GPU) Validate(path string) error {
	pos := []struct {
		f string
		v float64
	}{
		{"bf16_tflops", g.BF16TFLOPS}, {"hbm_tb_s", g.HBMTBps}, {"memory_gib", g.MemoryGiB},
		{"efficiency.gemm", g.Eff.GEMM}, {"efficiency.attention", g.Eff.Attention},
		{"efficiency.memory", g.Eff.Memory}, {"efficiency.link", g.Eff.Link},
	}
	if g.Name == "" {
		return fmt.Errorf("%s: field name: expected a GPU name, found nothing", path)
	}
	for _, p := range pos {
		if !(p.v > 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("%s: field %s: expected a finite positive number, found %v", path, p.f, p.v)
		}
	}
	// Peaks outside these ranges are typos or unit mix-ups (TB/s written as
	// GB/s), and would make steps of days.
	for _, p := range []struct {
		f      string
		v      float64
		lo, hi float64
	}{{"bf16_tflops", g.BF16TFLOPS, 0.1, 1e6}, {"hbm_tb_s", g.HBMTBps, 0.01, 1e4}, {"memory_gib", g.MemoryGiB, 0.1, 1e6}} {
		if p.v < p.lo || p.v > p.hi {
			return fmt.Errorf("%s: field %s: expected %g to %g, found %v", path, p.f, p.lo, p.hi, p.v)
		}
	}
	for _, p := range []struct {
		f string
		v float64
	}{{"efficiency.gemm", g.Eff.GEMM}, {"efficiency.attention", g.Eff.Attention}, {"efficiency.memory", g.Eff.Memory}, {"efficiency.link", g.Eff.Link}} {
		if p.v > 1 {
			return fmt.Errorf("%s: field %s: expected a fraction in (0,1], found %v", path, p.f, p.v)
		}
	}
	for _, p := range []struct {
		f string
		v float64
	}{{"fp8_tflops", g.FP8TFLOPS}, {"fp4_tflops", g.FP4TFLOPS}, {"link_gb_s", g.LinkGBps}, {"link_latency_us", g.LinkLatUS}, {"host_link_gb_s", g.HostLinkGBps},
		{"efficiency.kernel_us", g.Eff.KernelUS}, {"efficiency.attention_kernel_us", g.Eff.AttnUS}, {"efficiency.layer_overhead_us", g.Eff.LayerUS},
		{"efficiency.step_overhead_us", g.Eff.StepUS}, {"efficiency.tp_step_overhead_us", g.Eff.TPStepUS}, {"efficiency.tp_host_overhead_us", g.Eff.TPHostUS},
		{"efficiency.seq_step_overhead_us", g.Eff.SeqStepUS}, {"efficiency.tokenize_us", g.Eff.TokenizeUS}, {"efficiency.reserved_gib", g.Eff.ReserveGiB},
		{"efficiency.mxfp4_moe.layer_us", g.Eff.MXFP4MoE.LayerUS}, {"efficiency.mxfp4_moe.weight_rate", g.Eff.MXFP4MoE.WeightRate}, {"efficiency.mxfp4_moe.gemm", g.Eff.MXFP4MoE.GEMM}} {
		if !(p.v >= 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("%s: field %s: expected a finite non-negative number, found %v", path, p.f, p.v)
		}
	}
	if m := g.Eff.MXFP4MoE; m != (MoEKernel{}) {
		if !m.on() || m.GEMM > 1 {
			return fmt.Errorf("%s: field efficiency.mxfp4_moe: expected weight_rate > 0 and gemm in (0,1] (or no mxfp4_moe at all), found weight_rate %v, gemm %v", path, m.WeightRate, m.GEMM)
		}
	}
	if g.SMs < 0 || !(g.ClockMHz >= 0) || math.IsInf(g.ClockMHz, 0) || !(g.SmemKiB >= 0) || math.IsInf(g.SmemKiB, 0) {
		return fmt.Errorf("%s: fields sms, clock_mhz, smem_kib: expected finite non-negative numbers, found %d, %v, %v", path, g.SMs, g.ClockMHz, g.SmemKiB)
	}
	return g.validateFlash(path)
}

// PeakTFLOPS is the tensor-core peak for GEMMs whose weights are stored in d:
// FP8/FP4 weights use the low-precision units when present, else run at BF16
// (weight-only quantisation dequantises in the kernel).
func (g *GPU) PeakTFLOPS(d Dtype) float64 {
	switch d {
	case FP8, INT8:
		if g.FP8TFLOPS > 0 {
			return g.FP8TFLOPS
		}
	case FP4:
		if g.FP4TFLOPS > 0 {
			return g.FP4TFLOPS
		}
	}
	return g.BF16TFLOPS
}
