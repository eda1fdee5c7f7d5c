package roofline

import (
	"math"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/latency"
)

// unitGPU has round numbers so expected values can be worked out by hand:
// 100 TFLOP/s, 1 TB/s, 100 GB/s link with 10 µs latency, no floors.
func unitGPU() GPU {
	return GPU{Name: "unit", BF16TFLOPS: 100, HBMTBps: 1, MemoryGiB: 1, LinkGBps: 100, LinkLatUS: 10,
		Eff: Efficiency{GEMM: 1, Attention: 1, Memory: 1, Link: 1, ReserveGiB: 0.25}}
}

const denseJSON = `{"model_type":"llama","hidden_size":1024,"num_hidden_layers":2,"num_attention_heads":8,
"num_key_value_heads":2,"head_dim":128,"intermediate_size":4096,"vocab_size":1000,"torch_dtype":"bfloat16"}`

const moeJSON = `{"model_type":"mixtral","hidden_size":1024,"num_hidden_layers":2,"num_attention_heads":8,
"num_key_value_heads":2,"head_dim":128,"intermediate_size":2048,"vocab_size":1000,"torch_dtype":"bfloat16",
"num_local_experts":4,"num_experts_per_tok":2}`

func mustArch(t *testing.T, js string) *Arch {
	t.Helper()
	a, err := ParseConfig("test.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// norm3 is a GEMM's time from its compute and memory times, written out
// independently of gemmRoof: (c³ + m³)^⅓.
func norm3(c, m float64) float64 { return math.Cbrt(c*c*c + m*m*m) }

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.9g, want %.9g", what, got, want)
	}
}

func TestDenseParams(t *testing.T) {
	a := mustArch(t, denseJSON)
	// attention: q,o 1024·8·128 each, k,v 1024·2·128 each
	near(t, "AttnParams", a.AttnParams(), 2*1024*8*128+2*1024*2*128) // 2,621,440
	// layer = attn + 3·1024·4096 = 15,204,352; ×2 + embed and head 2·1000·1024
	near(t, "TotalParams", a.TotalParams(), 2*15204352+2048000)
	// KV: 2 (k,v) · 2 heads · 128 · 2 layers · 2 bytes
	near(t, "KVBytesPerTokenRank(1)", a.KVBytesPerTokenRank(1), 2048)
	// TP 4 > 2 KV heads: one KV head replicated per rank
	near(t, "KVBytesPerTokenRank(4)", a.KVBytesPerTokenRank(4), 1024)
}

// Decode of one sequence with 100 cached tokens: every GEMM is memory
// bound, so time = bytes / 1 TB/s.
func TestDenseDecodeByHand(t *testing.T) {
	rf, err := New(mustArch(t, denseJSON), unitGPU(), 1)
	if err != nil {
		t.Fatal(err)
	}
	b := &latency.Batch{DecodeSeqs: 1, DecodeCtx: 100}
	tr := rf.Terms(b)
	// weights: 2 layers · 15,204,352 · 2 B + LM head 1000·1024·2 B = 62,865,408
	// activations per layer (m·k + m·n)·2: qkv 5,120 + o 4,096 + gate_up 18,432 + down 10,240 = 37,888
	// LM head activations (1024 + 1000)·2 = 4,048
	near(t, "GEMMBytes", tr.GEMMBytes, 62865408+2*37888+4048)
	// attention per layer: KV read 100 + written 1 token · 1,024 B, q+o 4,096 B; 4·8·128·100 FLOPs
	near(t, "AttnBytes", tr.AttnBytes, 2*(101*1024+4096))
	near(t, "AttnFLOPs", tr.AttnFLOPs, 2*4*8*128*100)
	// elementwise per layer per token: norms 4·1024 + rope 2·(8+2)·128 + SiLU·mul 3·4096 = 18,944 elements
	near(t, "ElemBytes", tr.ElemBytes, 2*18944*2)
	// GEMMs at 1 TB/s and 100 TFLOP/s, 1 row: (m·k + m·n)·2 + n·k·2 bytes, 2·n·k FLOPs each
	gemm := func(n, k float64) float64 { return norm3(2*n*k/1e14*1e6, ((k+n)*2+n*k*2)/1e12*1e6) }
	layer := gemm(1536, 1024) + gemm(1024, 1024) + gemm(8192, 1024) + gemm(1024, 4096)
	near(t, "TotalUS", tr.TotalUS, 2*layer+gemm(1000, 1024)+0.21504+0.075776)
	if got := rf.StepTime(b); got != 63 {
		t.Errorf("StepTime = %d, want 63", got)
	}
}

// Prefill of 1000 tokens: layer GEMMs and attention are compute bound, the
// LM head (one row) is memory bound.
func TestDensePrefillByHand(t *testing.T) {
	rf, err := New(mustArch(t, denseJSON), unitGPU(), 1)
	if err != nil {
		t.Fatal(err)
	}
	b := &latency.Batch{PrefillSeqs: 1, PrefillTokens: 1000, PrefillAttn: 1000 * 1001 / 2}
	tr := rf.Terms(b)
	near(t, "GEMMFLOPs", tr.GEMMFLOPs, 2*1000*2*15204352+2*1000*1024)
	// 2·1000·30,408,704 / 1e14 s = 608.17408 µs; LM head 2,052,048 B / 1e12 = 2.052048 µs
	// attention 2 layers · 4·8·128·500,500 / 1e14 = 41.00096 µs
	// elementwise: 1000 tokens · 75,776 B = 75.776 µs
	// each GEMM costs (c³ + m³)^⅓ of its compute and memory times: at
	// m = 1000 on this GPU (ridge m ≈ 100) memory adds 0.39% to the layers
	gemm := func(m, n, k float64) float64 { return norm3(2*m*n*k/1e14*1e6, ((m*k+m*n)*2+n*k*2)/1e12*1e6) }
	layer := gemm(1000, 1536, 1024) + gemm(1000, 1024, 1024) + gemm(1000, 8192, 1024) + gemm(1000, 1024, 4096)
	near(t, "layer GEMMs", math.Round(2*layer*1e4)/1e4, 610.5501)
	near(t, "TotalUS", tr.TotalUS, 2*layer+gemm(1, 1000, 1024)+41.00096+75.776)
	near(t, "ComputeUS", tr.ComputeUS, 608.17408+0.02048+41.00096)
}

func TestMoEDecodeByHand(t *testing.T) {
	a := mustArch(t, moeJSON)
	if a.MoELayers != 2 || a.Experts != 4 || a.ExpertsPerTok != 2 || a.ExpertIntermediate != 2048 {
		t.Fatalf("moe parse: %+v", a)
	}
	near(t, "ExpectedExperts(1 token)", ExpectedExperts(4, 2, 1), 2)
	near(t, "ExpectedExperts(2 tokens)", ExpectedExperts(4, 2, 2), 3)
	near(t, "ExpectedExperts(64 tokens)", ExpectedExperts(4, 2, 64), 4*(1-math.Pow(0.5, 64)))
	rf, err := New(a, unitGPU(), 1)
	if err != nil {
		t.Fatal(err)
	}
	tr := rf.Terms(&latency.Batch{DecodeSeqs: 1, DecodeCtx: 100})
	// per layer: qkv 3,150,848 + o 2,101,248 + router 10,248
	// + experts gate_up (2 rows) 20,480 + 2 experts·4096·1024·2 = 16,797,696
	// + down 12,288 + 2·1024·2048·2 = 8,400,896  → 30,460,936; LM head 2,052,048
	near(t, "GEMMBytes", tr.GEMMBytes, 2*30460936+2052048)
	// FLOPs count top-k experts only: per layer 2·(1536·1024 + 1024·1024 + 4·1024 + 2·(4096·1024 + 1024·2048))
	near(t, "GEMMFLOPs", tr.GEMMFLOPs, 2*2*(1536*1024+1024*1024+4*1024+2*(4096*1024+1024*2048))+2*1000*1024)
}

func TestTPDecodeByHand(t *testing.T) {
	rf, err := New(mustArch(t, denseJSON), unitGPU(), 2)
	if err != nil {
		t.Fatal(err)
	}
	tr := rf.Terms(&latency.Batch{DecodeSeqs: 1, DecodeCtx: 100})
	// per rank per layer: qkv n=(4+2)·128 → 1,576,448; o k=512 → 1,051,648;
	// gate_up n=4096 → 8,398,848; down k=2048 → 4,200,448; LM head n=500 → 1,027,048
	near(t, "GEMMBytes", tr.GEMMBytes, 2*(1576448+1051648+8398848+4200448)+1027048)
	// attention per rank per layer: 101 tokens · 2·1·128·2 B + q,o 2·4·128·2 B
	near(t, "AttnBytes", tr.AttnBytes, 2*(101*512+2048))
	// 4 all-reduces of 2,048 B: ring moves 2·(1/2)·2,048 B each at 100 GB/s + 10 µs
	near(t, "CommBytes", tr.CommBytes, 4*2048)
	near(t, "CommUS", tr.CommUS, 4*(10+2048/100e9*1e6))
	// elementwise per rank: 4·1024 + 2·(4+1)·128 + 3·2048 = 11,520 elements per layer
	near(t, "ElemBytes", tr.ElemBytes, 2*11520*2)
	gemm := func(n, k float64) float64 { return norm3(2*n*k/1e14*1e6, ((k+n)*2+n*k*2)/1e12*1e6) }
	layer := gemm(768, 1024) + gemm(1024, 512) + gemm(4096, 1024) + gemm(1024, 2048)
	near(t, "TotalUS", tr.TotalUS, 2*layer+gemm(500, 1024)+0.10752+40.08192+0.04608)
}

func TestKVCapacity(t *testing.T) {
	rf, err := New(mustArch(t, denseJSON), unitGPU(), 1)
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 GiB − 0.25 GiB reserve − 64,913,408 B weights = 203,522,048 B / 2,048 B per token
	got, err := rf.KVCapacityTokens(0.5, EngineLimits{})
	if err != nil || got != 99376 {
		t.Errorf("KVCapacityTokens(0.5) = %d, %v; want 99376", got, err)
	}
	if _, err := rf.KVCapacityTokens(0.2, EngineLimits{}); err == nil || !strings.Contains(err.Error(), "weights need") {
		t.Errorf("KVCapacityTokens(0.2) error = %v, want weights-need error", err)
	}
	if _, err := rf.KVCapacityTokens(1.5, EngineLimits{}); err == nil {
		t.Error("KVCapacityTokens(1.5): want error")
	}
}

func TestStepTimeMonotone(t *testing.T) {
	for _, name := range ModelNames() {
		a, err := LoadModel(name)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := LookupGPU("h100")
		tp := 8
		for a.Heads%tp != 0 {
			tp /= 2
		}
		rf, err := New(a, g, tp)
		if err != nil {
			t.Fatal(err)
		}
		prev := int64(0)
		for n := 1; n <= 512; n *= 2 {
			st := rf.StepTime(&latency.Batch{DecodeSeqs: n, DecodeCtx: int64(n) * 1000})
			if st < prev {
				t.Errorf("%s: decode %d seqs takes %d µs < %d µs for fewer", name, n, st, prev)
			}
			prev = st
		}
	}
}

func TestTPHeadsMustDivide(t *testing.T) {
	_, err := New(mustArch(t, denseJSON), unitGPU(), 3)
	if err == nil || !strings.Contains(err.Error(), "not divisible by tp 3") {
		t.Errorf("tp 3: error = %v", err)
	}
}

// BenchmarkStepTime: the simulator calls this once per engine step.
func BenchmarkStepTime(b *testing.B) {
	for _, name := range []string{"llama-3.1-70b", "qwen3-30b-a3b", "deepseek-v2-lite"} {
		a, err := LoadModel(name)
		if err != nil {
			b.Fatal(err)
		}
		g, _ := LookupGPU("h100")
		rf, err := New(a, g, 2)
		if err != nil {
			b.Fatal(err)
		}
		batch := &latency.Batch{PrefillSeqs: 1, PrefillTokens: 512, PrefillAttn: 512 * 513 / 2, DecodeSeqs: 100, DecodeCtx: 100_000}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				batch.DecodeCtx++
				_ = rf.StepTime(batch)
			}
		})
	}
}

// The worked example of docs/latency.md (Llama-3.1-8B, H100, one 512-token
// chunk + 32 decodes at 1,024 context), plus a 2048-token prefill and a
// 64-request decode batch checked by hand the same way; keep the doc and
// the code in step.
func TestDocsWorkedExample(t *testing.T) {
	a, err := LoadModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	g, err := LoadGPU("h100")
	if err != nil {
		t.Fatal(err)
	}
	mixed := latency.Batch{PrefillSeqs: 1, PrefillTokens: 512, PrefillAttn: 512 * 513 / 2, DecodeSeqs: 32, DecodeCtx: 32 * 1024}
	prefill := latency.Batch{PrefillSeqs: 1, PrefillTokens: 2048, PrefillAttn: 2048 * 2049 / 2}
	decode := latency.Batch{DecodeSeqs: 64, DecodeCtx: 64 * 1024}
	for _, c := range []struct {
		name     string
		tp       int
		b        latency.Batch
		step     int64
		commUS   float64
		kvTok    float64
		capacity int64
	}{
		// The attention's 52.57 µs a layer: 1.57 µs cache write + 51.00 µs
		// reading KV, Q and O (the FA3 tiles, 11.60 µs, hide under it).
		{"doc mixed tp1", 1, mixed, 14204, 0, 131072, 443573},
		// TP1's kernels at half width + 64 all-reduces × 29.26 µs (the
		// engine's 1,700 µs tp_host_overhead_us is host time: TestHostStep)
		{"doc mixed tp2", 2, mixed, 9638, 1872.5, 65536, 979363},
		// 32 layers × (1132.9 GEMM + 81.3 attention + 100.2 elementwise) µs
		// + LM head 369.1 µs + floors 898.5 µs (GEMMs (c³ + m³)^⅓: +4.4
		// µs a layer over the compute time alone). Attention: 5.9 µs cache
		// write + 75.5 µs FA3 tiles (512 CTAs of 128 rows = 32 positions ×
		// 4 heads, 4,418 tiles of 1.651 µs + 5 µs a CTA over 132 SMs);
		// floors 129 GEMMs × 2.5 + 32 × (8 prefill attention + 10) µs.
		{"2048 prefill tp1", 1, prefill, 43327, 0, 131072, 443573},
		// memory bound: (15.31 GB weights + 8.63 GB KV + 0.29 GB elementwise)
		// / 2.8475 TB/s + floors 1058.5 µs, + 19.1 µs the GEMMs' compute
		// side adds at m = 64 ((c³ + m³)^⅓)
		{"64 decodes at 1k tp1", 1, decode, 9588, 0, 131072, 443573},
	} {
		r, err := New(a, g, c.tp)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.StepTime(&c.b); got != c.step {
			t.Errorf("%s: step %d µs, want %d", c.name, got, c.step)
		}
		if got := r.Terms(&c.b).CommUS; math.Abs(got-c.commUS) > 0.1 {
			t.Errorf("%s: all-reduce %.2f µs, want %.1f", c.name, got, c.commUS)
		}
		if got := r.KVBytesPerToken(); got != c.kvTok {
			t.Errorf("%s: KV %v B/token, want %v", c.name, got, c.kvTok)
		}
		if got, err := r.KVCapacityTokens(0.9, serveH100); err != nil || got != c.capacity {
			t.Errorf("%s: capacity %d (%v), want %d", c.name, got, err, c.capacity)
		}
	}
}

// KV bytes per token per rank worked out by hand: layers·2·kv_heads·hd·2 B
// for GQA (divided by TP), layers·(kv_lora+rope)·2 B for MLA (every rank
// holds the whole latent), and Mixtral's 93 GB of BF16 weights do not fit
// one H100.
func TestMoEMLAKVByHand(t *testing.T) {
	g, _ := LoadGPU("h100")
	for _, c := range []struct {
		model  string
		tp     int
		kvTok  float64
		fitErr bool
	}{
		{"qwen3-30b-a3b", 1, 48 * 2 * 4 * 128 * 2, false},
		{"qwen3-30b-a3b", 2, 48 * 2 * 2 * 128 * 2, false},
		{"mixtral-8x7b", 1, 32 * 2 * 8 * 128 * 2, true},
		{"mixtral-8x7b", 2, 32 * 2 * 4 * 128 * 2, false},
		{"deepseek-v2-lite", 1, 27 * (512 + 64) * 2, false},
		{"deepseek-v2-lite", 2, 27 * (512 + 64) * 2, false},
	} {
		a, err := LoadModel(c.model)
		if err != nil {
			t.Fatal(err)
		}
		r, err := New(a, g, c.tp)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.KVBytesPerToken(); got != c.kvTok {
			t.Errorf("%s tp%d: KV %v B/token, want %v", c.model, c.tp, got, c.kvTok)
		}
		if _, err := r.KVCapacityTokens(0.9, serveH100); (err != nil) != c.fitErr {
			t.Errorf("%s tp%d: capacity error %v, want error %v", c.model, c.tp, err, c.fitErr)
		}
	}
}

// Absurd GPU files must not wrap the int64 step time to 1 µs (Go's
// conversion of an out-of-range float is undefined; on amd64 it is
// negative), and a TP all-reduce needs a link.
func TestAbsurdGPU(t *testing.T) {
	a := mustArch(t, denseJSON)
	r, err := New(a, unitGPU(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r.bw = 1e-300 // below what Validate admits: only the cap can catch it here
	b := &latency.Batch{DecodeSeqs: 1, DecodeCtx: 100}
	if got := r.StepTime(b); got != int64(MaxStepUS) {
		t.Errorf("step at 1e-300 B/s = %d µs, want the cap %d", got, int64(MaxStepUS))
	}
	noLink := unitGPU()
	noLink.LinkGBps = 0
	if _, err := New(a, noLink, 2); err == nil || !strings.Contains(err.Error(), "field link_gb_s: expected a positive number for tp > 1, found 0") {
		t.Errorf("tp2 without a link: error = %v", err)
	}
	inf := unitGPU()
	inf.Eff.KernelUS = math.Inf(1)
	if err := inf.Validate("g.yaml"); err == nil || !strings.Contains(err.Error(), "g.yaml: field efficiency.kernel_us: expected a finite non-negative number, found +Inf") {
		t.Errorf("infinite kernel floor: error = %v", err)
	}
}

// The engine's per-request CPU work is kept out of StepTime (the engine adds
// or overlaps it, latency.WithHost): 35 µs per request in the built-in
// profiles, plus the TP driver's 1,700 µs per step at TP > 1.
func TestHostStep(t *testing.T) {
	a, err := LoadModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := LookupGPU("h100")
	r, _ := New(a, g, 1)
	b := &latency.Batch{PrefillSeqs: 1, PrefillTokens: 100, PrefillAttn: 5050, DecodeSeqs: 9, DecodeCtx: 9000}
	if !r.HostTimed() || r.HostStepUS(b) != 350 {
		t.Errorf("built-in profile's CPU work: %v %d, want true 350 (10 requests × 35 µs)", r.HostTimed(), r.HostStepUS(b))
	}
	step := r.StepTime(b)
	g.Eff.SeqStepUS = 40.4
	r2, _ := New(a, g, 1)
	if !r2.HostTimed() || r2.HostStepUS(b) != 404 || r2.StepTime(b) != step {
		t.Errorf("host %v %d (want 404), step %d (want %d)", r2.HostTimed(), r2.HostStepUS(b), r2.StepTime(b), step)
	}
	g.Eff.SeqStepUS = 1e300
	if r3, _ := New(a, g, 1); r3.HostStepUS(b) != MaxStepUS {
		t.Errorf("absurd seq_step_overhead_us: %d", r3.HostStepUS(b))
	}
	g.Eff.SeqStepUS = 0
	if r0, _ := New(a, g, 1); r0.HostTimed() || r0.HostStepUS(b) != 0 {
		t.Errorf("seq_step_overhead_us 0 at TP1 still charges CPU work: %v %d", r0.HostTimed(), r0.HostStepUS(b))
	}
	// At TP > 1 the built-in profiles charge the engine's driving of its
	// workers as host time: added by a synchronous scheduler, overlapped by
	// async scheduling. B200 keeps its measured on-path TP step instead.
	g, _ = LookupGPU("h100")
	r4, _ := New(a, g, 2)
	gpu := r4.StepTime(b)
	const host = 1700 + 350
	if !r4.HostTimed() || r4.HostStepUS(b) != host {
		t.Errorf("h100 tp2 host %v %d, want true %d", r4.HostTimed(), r4.HostStepUS(b), host)
	}
	if s, as := latency.WithHost(r4, false).StepTime(b), latency.WithHost(r4, true).StepTime(b); s != gpu+host || as != max(gpu, host) {
		t.Errorf("h100 tp2: sync %d (want %d), async %d (want %d)", s, gpu+host, as, max(gpu, host))
	}
	b200, _ := LookupGPU("b200")
	r5, _ := New(a, b200, 2)
	b200.Eff.TPStepUS = 0
	r6, _ := New(a, b200, 2)
	if r5.HostStepUS(b) != 350 || r5.StepTime(b)-r6.StepTime(b) != 1100 {
		t.Errorf("b200 tp2: host %d µs, on-path TP step %d µs, want 350 (no TP driver), 1100", r5.HostStepUS(b), r5.StepTime(b)-r6.StepTime(b))
	}
}

// gpt-oss-120b's MXFP4 experts on Hopper cost what aiconfigurator's vLLM
// MoE tables measure: per layer 38 µs + max(compute at 0.42 of the BF16
// peak, the experts' weights at 4.9·10^12 per second). By hand, H100 TP1,
// 32 tokens touching all 128 experts (3·2880² weights each): compute
// 2·128·24,883,200 / (989.5e12·0.42) = 15.33 µs, weights 128·24,883,200 /
// 4.9e12 = 650.0 µs: 688.0 µs (the H100 table: 687.7 µs at 48 tokens).
// TP4 quarters the weights: 38 + 162.5 µs.
func TestMXFP4MoEKernel(t *testing.T) {
	a, err := LoadModel("gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := LookupGPU("h100")
	for _, c := range []struct {
		tp            int
		rows, touched float64
		want          float64
	}{
		{1, 128, 128, 38 + 128*24883200/4.9e12*1e6},
		{4, 128, 128, 38 + 128*24883200/4/4.9e12*1e6},
		{1, 4 * 16384, 128, 38 + 2*4*16384*24883200/(989.5e12*0.42)*1e6},
	} {
		r, err := New(a, g, c.tp)
		if err != nil {
			t.Fatal(err)
		}
		var tm Terms
		r.moeKernelCost(&tm, c.rows, c.touched, 1)
		if got := tm.RoofUS + tm.OverheadUS; math.Abs(got-c.want) > 1e-6 {
			t.Errorf("tp%d rows %v: %.4f µs, want %.4f", c.tp, c.rows, got, c.want)
		}
	}
	// The step uses it for MXFP4 experts only: BF16 MoE models and GPUs
	// without the profile (B200) cost routed experts as grouped GEMMs.
	b := &latency.Batch{DecodeSeqs: 8, DecodeCtx: 8 * 1024}
	r, _ := New(a, g, 1)
	plain := g
	plain.Eff.MXFP4MoE = MoEKernel{}
	r0, _ := New(a, plain, 1)
	if !r.moe.on() || r0.moe.on() || r.StepTime(b) <= r0.StepTime(b) {
		t.Errorf("gpt-oss h100: kernel %v/%v, step %d vs GEMM path %d", r.moe.on(), r0.moe.on(), r.StepTime(b), r0.StepTime(b))
	}
	mix, _ := LoadModel("mixtral-8x7b")
	if rm, _ := New(mix, g, 2); rm.moe.on() {
		t.Error("bf16 mixtral uses the MXFP4 kernel profile")
	}
	b200, _ := LookupGPU("b200")
	if rb, _ := New(a, b200, 1); rb.moe.on() {
		t.Error("b200 has no measured MXFP4 kernel of the version it is checked against")
	}
}

// The RTX PRO 6000 all-reduce by hand: its profile's link efficiency 0.25
// of PCIe Gen5 x16 (64 GB/s) is the 16 GB/s of the LLMServingSim host.
// Qwen3-32B, 128 decode tokens: 128·5120·2 B = 1,310,720 B; TP2 ring moves
// all of it once: 1,310,720 / 16e9 s = 81.92 µs, + 6.5 µs latency.
func TestRTXPro6000AllReduce(t *testing.T) {
	g, ok := LookupGPU("rtxpro6000")
	if !ok {
		t.Fatal("rtxpro6000 not catalogued")
	}
	if got := g.AllReduceUS(128*5120*2, 2); math.Abs(got-88.42) > 1e-9 {
		t.Errorf("all-reduce %.6f µs, want 88.42", got)
	}
}

// gpt-oss-120b stores only its experts in MXFP4; attention, router,
// embedding and LM head stay BF16 (its quantization_config), and vLLM runs
// the MXFP4 experts with BF16 activations.
func TestMixedPrecisionCheckpoint(t *testing.T) {
	a, err := LoadModel("gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	if !a.AttnUnquantized || a.Math() != BF16 {
		t.Fatalf("gpt-oss: attention kept %v, math %s; want true, bf16", a.AttnUnquantized, a.Math())
	}
	// By hand: 36 layers × 128 experts × 3 × 2880² at ½ byte; 36 × attention
	// (2880·64·64·2 + 2·2880·8·64), 36 routers (2880·128), embedding and LM
	// head (2 × 201088·2880) at 2 bytes.
	experts := 36.0 * 128 * 3 * 2880 * 2880 * 0.5
	bf16 := (36.0*(2880*64*64*2+2*2880*8*64) + 36*2880*128 + 2*201088*2880) * 2
	if got, want := a.WeightBytesRank(2), (experts+bf16)/2; math.Abs(got-want) > 1 {
		t.Errorf("weight bytes per rank at TP2 = %.0f, want %.0f", got, want)
	}
	// Every GEMM of a long prefill runs at BF16 on both GPUs: B200 computes
	// it 2250/989.5 times faster than H100 (same GEMM and attention
	// efficiency), not at its FP4 rate.
	b := &latency.Batch{PrefillSeqs: 1, PrefillTokens: 8192, PrefillAttn: 8192 * 8193 / 2}
	h100, _ := LookupGPU("h100")
	h100.Eff.MXFP4MoE = MoEKernel{} // both as grouped GEMMs (B200 has no kernel profile)
	h100.Eff.Flash = FlashKernel{}  // both with attention by FLOPs (B200 has no tile model)
	b200, _ := LookupGPU("b200")
	rh, _ := New(a, h100, 1)
	rb, _ := New(a, b200, 1)
	if got, want := rh.Terms(b).ComputeUS/rb.Terms(b).ComputeUS, 2250/989.5; math.Abs(got-want) > 0.01 {
		t.Errorf("H100/B200 compute time = %.3f, want %.3f", got, want)
	}
	// A --weight-dtype override of the checkpoint's own dtype changes
	// nothing; another dtype runs as vLLM runs it by default.
	c := *a
	c.SetWeightDtype(FP4)
	if c.Math() != BF16 {
		t.Errorf("fp4 override of an mxfp4 checkpoint: math %s, want bf16", c.Math())
	}
	c.SetWeightDtype(FP8)
	if c.Math() != FP8 || c.AttnDtype() != BF16 {
		t.Errorf("fp8 override: math %s attention %s, want fp8, bf16", c.Math(), c.AttnDtype())
	}
	l, _ := LoadModel("llama-3.1-70b")
	l.SetWeightDtype(FP8)
	if l.Math() != FP8 || l.AttnDtype() != FP8 {
		t.Errorf("llama fp8 override: math %s attention %s, want fp8, fp8", l.Math(), l.AttnDtype())
	}
	l.SetWeightDtype(INT4)
	if l.Math() != BF16 {
		t.Errorf("llama int4 override: math %s, want bf16 (weight-only)", l.Math())
	}
}

// TestGEMMRoof checks the GEMM's combination of compute and memory time:
// the larger alone far from the ridge, 2^⅓ of it at the ridge, symmetric.
func TestGEMMRoof(t *testing.T) {
	for _, c := range []struct{ c, m, want float64 }{
		{0, 0, 0},
		{5, 0, 5},
		{0, 5, 5},
		{10, 10, 10 * math.Cbrt(2)},
		{3, 4, math.Cbrt(27 + 64)},
		{4, 3, math.Cbrt(27 + 64)},
		{1000, 1, 1000 * math.Cbrt(1+1e-9)},
	} {
		if got := gemmRoof(c.c, c.m); math.Abs(got-c.want) > 1e-12*math.Max(1, c.want) {
			t.Errorf("gemmRoof(%g, %g) = %.15g, want %.15g", c.c, c.m, got, c.want)
		}
	}
}

// serveH100 is vllm serve's default batch limits on an H100.
var serveH100 = EngineLimits{MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192}
