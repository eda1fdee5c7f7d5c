package roofline

import (
	"math"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/latency"
)

func TestFlashTile(t *testing.T) {
	for _, c := range []struct {
		kernel  string
		headDim int
		mq, nk  float64
	}{
		{"fa3", 64, 192, 128}, {"fa3", 96, 192, 128}, {"fa3", 128, 128, 128}, {"fa3", 192, 128, 96}, {"fa3", 256, 128, 80},
		{"fa2", 64, 64, 256}, {"fa2", 80, 64, 256}, {"fa2", 128, 64, 128}, {"fa2", 256, 64, 64},
	} {
		if mq, nk := flashTile(c.kernel, c.headDim); mq != c.mq || nk != c.nk {
			t.Errorf("%s hd %d: tile %v × %v, want %v × %v", c.kernel, c.headDim, mq, nk, c.mq, c.nk)
		}
	}
}

// One H100 prefill of 2,048 tokens, 32 query heads over 8 KV heads of 128
// (Llama-3.1-8B's attention), by hand. A tile: 4·128·128·128 FLOPs at
// 989.5 TFLOP/s / 132 SMs / 0.93 = 1.2033 µs, plus 0.8 × 128·128 exps at
// 16 a clock at 1,830 MHz = 0.4477 µs: 1.6509 µs. FA3 packs the 4 query
// heads of a KV head into a 128-row block of 32 positions: 64 blocks × 8 KV
// heads = 512 CTAs; tiles 8 × (2,098,176 pairs × 4 / 128² + 64 × ½(1 +
// 32/128)) = 4,418. Work 512 × 5 + 4,418 × 1.6509 = 9,853.8 µs over 132
// SMs = 74.65, + the last wave's empty share (4 − 3.879) × the shortest CTA
// (5 + 1 tile) = 75.456 µs, above the longest CTA (5 + 16 tiles = 31.41).
// The cache write moves 2,048 × 2 × 4,096 B = 16.8 MB at 2.8475 TB/s =
// 5.892 µs; the attention's reads (Q, K, V, O: 41.9 MB = 14.73 µs) hide
// under its tiles. Floor 8 µs: 89.348 µs (measured, vLLM 0.24: 89.0).
func TestContextAttentionByHand(t *testing.T) {
	g, _ := LookupGPU("h100")
	if got := g.ContextAttentionUS(1, 2048, 32, 8, 128); math.Abs(got-89.348) > 0.001 {
		t.Errorf("H100 1 × 2048 tokens, 32/8 heads of 128: %.4f µs, want 89.348", got)
	}
	// Without the kernel it is the FLOP-and-byte roofline, unchanged.
	g.Eff.Flash = FlashKernel{}
	f, b := ContextAttention(1, 2048, 32, 8, 128, 2)
	if got, want := g.ContextAttentionUS(1, 2048, 32, 8, 128), g.AttentionUS(f, b); got != want {
		t.Errorf("kernel off: %v µs, want AttentionUS's %v", got, want)
	}
}

// The step's prefill attention follows the chunks: a cached prefix, a
// longer chunk, a lopsided varlen batch all cost more; decode-only steps
// are the FLOP-and-byte form whatever the kernel (leap.go sums them).
func TestFlashStep(t *testing.T) {
	a, err := LoadModel("qwen3-14b")
	if err != nil {
		t.Fatal(err)
	}
	for _, gpu := range []string{"h100", "a100-80gb", "l40s"} {
		g, _ := LookupGPU(gpu)
		r, err := New(a, g, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !r.fl.on {
			t.Fatalf("%s: no prefill attention kernel", gpu)
		}
		off := g
		off.Eff.Flash = FlashKernel{}
		r0, _ := New(a, off, 1)
		chunk := func(q, ctx int64) latency.Batch {
			return latency.Batch{PrefillSeqs: 1, PrefillTokens: q, PrefillCtx: ctx, PrefillAttn: q * (ctx + (q+1)/2)}
		}
		step := func(b latency.Batch) float64 { return r.Terms(&b).TotalUS }
		if x, y := step(chunk(512, 0)), step(chunk(512, 8192)); !(y > x) {
			t.Errorf("%s: 512 tokens after 8,192 cached %.1f µs, not above %.1f without", gpu, y, x)
		}
		prev := 0.0
		for _, q := range []int64{1, 16, 100, 128, 129, 1000, 2048, 4096, 16384} {
			if s := step(chunk(q, 0)); !(s >= prev) {
				t.Errorf("%s: %d tokens %.1f µs, below %.1f for fewer", gpu, q, s, prev)
			} else {
				prev = s
			}
		}
		even := latency.Batch{PrefillSeqs: 2, PrefillTokens: 4096, PrefillAttn: 2 * 2048 * 2049 / 2}
		lopsided := latency.Batch{PrefillSeqs: 2, PrefillTokens: 4096, PrefillAttn: 3584*3585/2 + 512*513/2}
		if x, y := step(even), step(lopsided); !(y > x) {
			t.Errorf("%s: 3,584 + 512 tokens %.1f µs, not above 2 × 2,048's %.1f", gpu, y, x)
		}
		for _, d := range []latency.Batch{{DecodeSeqs: 1, DecodeCtx: 100}, {DecodeSeqs: 256, DecodeCtx: 256 * 3000}} {
			if x, y := r.Terms(&d), r0.Terms(&d); x != y {
				t.Errorf("%s: decode-only step %+v changed with the prefill kernel: %+v, want %+v", gpu, d, x, y)
			}
		}
	}
}

func TestFlashYAML(t *testing.T) {
	base := "name: h100x\nbf16_tflops: 989.5\nhbm_tb_s: 3.35\nmemory_gib: 79.6\n"
	chip := "sms: 132\nclock_mhz: 1830\nsmem_kib: 228\n"
	kernel := "efficiency:\n  prefill_attention:\n    kernel: fa3\n    mma: 0.93\n    softmax: 0.8\n    cta_us: 5\n    floor_us: 8\n"
	g, err := ParseGPU("x.yaml", []byte(base+chip+kernel))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := LookupGPU("h100")
	if g.Eff.Flash != h.Eff.Flash || g.SMs != h.SMs || g.ClockMHz != h.ClockMHz || g.SmemKiB != h.SmemKiB {
		t.Errorf("parsed %+v, %d SMs, %v MHz, %v KiB; want the built-in H100's", g.Eff.Flash, g.SMs, g.ClockMHz, g.SmemKiB)
	}
	for _, c := range []struct{ doc, want string }{
		{base + chip + strings.Replace(kernel, "fa3", "fa9", 1), `field efficiency.prefill_attention.kernel: expected fa3 or fa2, found "fa9"`},
		{base + chip + strings.Replace(kernel, "    kernel: fa3\n", "", 1), "field efficiency.prefill_attention.kernel: expected fa3 or fa2 (or no prefill_attention at all), found nothing"},
		{base + chip + strings.Replace(kernel, "mma: 0.93", "mma: 1.5", 1), "field efficiency.prefill_attention.mma: expected a fraction in (0,1], found 1.5"},
		{base + chip + strings.Replace(kernel, "cta_us: 5", "cta_us: -1", 1), "field efficiency.prefill_attention.cta_us: expected a finite non-negative number, found -1"},
		{base + kernel, "field sms: expected a finite positive number for efficiency.prefill_attention kernel fa3, found 0"},
		{base + "sms: 132\nclock_mhz: 1830\n" + strings.Replace(kernel, "fa3", "fa2", 1), "field smem_kib: expected a finite positive number for efficiency.prefill_attention kernel fa2, found 0"},
		{base + "sms: -1\n", "fields sms, clock_mhz, smem_kib: expected finite non-negative numbers, found -1, 0, 0"},
	} {
		if _, err := ParseGPU("bad.yaml", []byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error = %v, want %q", err, c.want)
		}
	}
}
