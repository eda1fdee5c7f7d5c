package roofline

import "fmt"

// EngineLimits are the batch limits vLLM sizes its memory-profiling run by
// (the deployment's max_num_seqs and max_num_batched_tokens).
type EngineLimits struct {
	MaxNumSeqs          int
	MaxNumBatchedTokens int
}

// vLLM (≥ 0.17) sizes the KV cache after a profiling run: util × memory −
// weights − the torch peak increase of a forward pass of
// max_num_batched_tokens plus a sampler pass of max_num_seqs requests −
// the non-torch memory that grew meanwhile (vllm/v1/worker/gpu_worker.py
// determine_available_memory; gpu_model_runner.py profile_run,
// _dummy_run, _dummy_sampler_run). Constants from the breakdowns vLLM
// 0.17–0.19 logs on H100 (lib/roofline/testdata/vllm_kv_memory.csv;
// docs/latency.md, "KV capacity: vLLM's memory profile").
const (
	// nonTorchGiB: CUDA context growth and cuBLAS workspaces of one GPU
	// (median of the 15 TP1 rows: 0.24–0.27 GiB; vLLM 0.17 0.13, granite
	// 0.46).
	nonTorchGiB = 0.25
	// nonTorchTPGiB: with TP > 1, custom all-reduce and NCCL buffers
	// (median of the 9 TP2 and TP4 rows: 2.06–2.21 GiB).
	nonTorchTPGiB = 2.10
	// profileBaseGiB and samplerBytesPerLogit: least squares of the logged
	// torch peak (less the MoE workspace) on max_num_seqs × vocab over the
	// 24 rows; the sampler holds the [max_num_seqs, vocab] logits in FP32
	// with its sort values, int64 indices and softmax copies (vllm/v1/sample).
	// Each model family held out, the refit stays within 0.14–0.21 GiB and
	// 14.0–14.4 B (TestMemoryReserveLeaveOneFamilyOut).
	profileBaseGiB       = 0.18
	samplerBytesPerLogit = 14.2
	// fusedMoEChunk is VLLM_FUSED_MOE_CHUNK_SIZE's default: the fused MoE
	// kernel's workspace is sized for at most this many tokens.
	fusedMoEChunk = 32768
	// legacyReserveGiB is the reserve of a model whose vocabulary is
	// unknown (the sampler term cannot be sized).
	legacyReserveGiB = 1.2
)

// MemoryReserve is what vLLM keeps from the KV cache on each rank besides
// the weights, in bytes, and how it was found. A GPU profile with
// reserved_gib > 0 fixes it; otherwise it is vLLM's profile:
// non-torch(TP) + base + max_num_seqs·vocab·samplerBytesPerLogit + the
// fused MoE workspace min(T, 32768)·top_k·(max(2·I, hidden) + I)·act
// bytes, I the expert width per rank.
func (r *Roofline) MemoryReserve(lim EngineLimits) (float64, string) {
	const gib = 1 << 30
	if g := r.G.Eff.ReserveGiB; g > 0 {
		return g * gib, fmt.Sprintf("reserved_gib %.2f GiB", g)
	}
	if r.A.Vocab <= 0 || lim.MaxNumSeqs <= 0 || lim.MaxNumBatchedTokens <= 0 {
		return legacyReserveGiB * gib, fmt.Sprintf("%.2f GiB (vocabulary or batch limits unknown)", legacyReserveGiB)
	}
	nt := nonTorchGiB * gib
	if r.TP > 1 {
		nt = nonTorchTPGiB * gib
	}
	sampler := float64(lim.MaxNumSeqs) * float64(r.A.Vocab) * samplerBytesPerLogit
	moe := r.moeWorkspaceBytes(lim.MaxNumBatchedTokens)
	total := nt + profileBaseGiB*gib + sampler + moe
	return total, fmt.Sprintf("%.2f GiB (non-torch %.2f, profile %.2f, sampler %.2f, MoE %.2f)",
		total/gib, nt/gib, profileBaseGiB, sampler/gib, moe/gib)
}

// moeWorkspaceBytes is the fused MoE kernel's intermediate caches for t
// tokens (vllm/model_executor/layers/fused_moe/fused_moe.py
// fused_experts_impl): cache1 and cache3 share M·top_k·max(N, K), cache2
// is M·top_k·N/2, with N = 2·I (gate and up) and K = hidden.
func (r *Roofline) moeWorkspaceBytes(t int) float64 {
	a := r.A
	if a.Experts == 0 || a.ExpertsPerTok == 0 || a.ExpertIntermediate == 0 {
		return 0
	}
	// EP keeps experts whole; otherwise TP (× DP, which then shards the
	// MoE layers too) splits their width.
	w, shard := a.ExpertIntermediate, r.TP
	if r.par != nil {
		if r.par.EP {
			shard = 1
		} else {
			shard *= r.par.DP
		}
	}
	w = (w + shard - 1) / shard
	b := a.ActDtype.Bytes()
	if b == 0 {
		b = 2
	}
	m := float64(min(t, fusedMoEChunk) * a.ExpertsPerTok)
	return m * float64(max(2*w, a.Hidden)+w) * b
}
