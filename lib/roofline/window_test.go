package roofline

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/latency"
)

// base is a dense config of 6 layers for the sliding-window keys.
const windowBase = `{"model_type":"%s","hidden_size":1024,"num_hidden_layers":6,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":128,"intermediate_size":4096,"vocab_size":1000%s}`

func TestSlidingWindowConfig(t *testing.T) {
	lt := func(types ...string) string {
		return `,"layer_types":["` + strings.Join(types, `","`) + `"]`
	}
	const s, f = "sliding_attention", "full_attention"
	for _, c := range []struct {
		name, typ, extra string
		window, layers   int
	}{
		{"absent", "llama", ``, 0, 0},
		{"null", "mistral", `,"sliding_window":null`, 0, 0},
		{"mistral v0.1: every layer", "mistral", `,"sliding_window":4096`, 4096, 6},
		{"layer_types", "gpt_oss", `,"sliding_window":128` + lt(s, f, s, f, s, f), 128, 3},
		{"layer_types all full", "gpt_oss", `,"sliding_window":128` + lt(f, f, f, f, f, f), 0, 0},
		{"gpt-oss without layer_types alternates", "gpt_oss", `,"sliding_window":128`, 128, 3},
		{"gemma 2 alternates", "gemma2", `,"sliding_window":4096`, 4096, 3},
		{"gemma 3 pattern 6", "gemma3_text", `,"sliding_window":1024,"sliding_window_pattern":6`, 1024, 5},
		{"cohere 2 pattern 4", "cohere2", `,"sliding_window":4096,"sliding_window_pattern":4`, 4096, 5},
		{"qwen off", "qwen2", `,"sliding_window":131072,"use_sliding_window":false,"max_window_layers":28`, 0, 0},
		{"qwen on from layer 2", "qwen2", `,"sliding_window":4096,"use_sliding_window":true,"max_window_layers":2`, 4096, 4},
		{"qwen on, max_window_layers all", "qwen2", `,"sliding_window":4096,"use_sliding_window":true,"max_window_layers":6`, 0, 0},
		{"layer_types win over use_sliding_window", "qwen3", `,"sliding_window":64,"use_sliding_window":true,"max_window_layers":0` + lt(f, f, s, s, f, f), 64, 2},
	} {
		a, err := ParseConfig("cfg.json", []byte(fmt.Sprintf(windowBase, c.typ, c.extra)))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if a.Window != c.window || a.WindowLayers != c.layers {
			t.Errorf("%s: window %d on %d layers, want %d on %d", c.name, a.Window, a.WindowLayers, c.window, c.layers)
		}
	}
	for _, c := range []struct{ name, extra, want string }{
		{"zero window", `,"sliding_window":0`, "cfg.json: field sliding_window: expected a positive integer up to 16777216, or null, found 0"},
		{"negative window", `,"sliding_window":-4`, "field sliding_window: expected a positive integer"},
		{"fractional window", `,"sliding_window":4.5`, "sliding_window"},
		{"short layer_types", `,"sliding_window":8` + lt(s, f), "cfg.json: field layer_types: expected one entry per layer (num_hidden_layers 6), found 2 entries"},
		{"unknown layer type", `,"sliding_window":8` + lt(s, f, s, f, "chunked_attention", f), `cfg.json: field layer_types[4]: expected "sliding_attention" or "full_attention", found "chunked_attention"`},
		{"sliding layers, no window", lt(s, f, s, f, s, f), "cfg.json: field sliding_window: expected a positive integer (layer_types lists 3 sliding_attention layers)"},
		{"sliding layers, window off", `,"sliding_window":8,"use_sliding_window":false` + lt(s, f, s, f, s, f), "field sliding_window: expected a positive integer (layer_types lists 3"},
		{"max_window_layers past the layers", `,"sliding_window":8,"use_sliding_window":true,"max_window_layers":7`, "cfg.json: field max_window_layers: expected 0..6 (num_hidden_layers), found 7"},
		{"zero pattern", `,"sliding_window":8,"sliding_window_pattern":0`, "cfg.json: field sliding_window_pattern: expected a positive integer, found 0"},
	} {
		_, err := ParseConfig("cfg.json", []byte(fmt.Sprintf(windowBase, "mistral", c.extra)))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "cfg.json") {
			t.Errorf("%s: error = %v, want it to contain %q", c.name, err, c.want)
		}
	}
	a, err := LoadModel("gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Window != 128 || a.WindowLayers != 18 {
		t.Errorf("gpt-oss-120b: window %d on %d of %d layers, want 128 on 18 (its layer_types)", a.Window, a.WindowLayers, a.Layers)
	}
	for _, name := range ModelNames() {
		if a, _ := LoadModel(name); a != nil && a.Window > 0 && name != "gpt-oss-120b" {
			t.Errorf("%s: window %d: no other catalogue model slides", name, a.Window)
		}
	}
}

// windowArch is a dense model with every layer (all) or every other layer
// attending over w tokens.
func windowArch(t *testing.T, w int, all bool) *Arch {
	t.Helper()
	typ, extra := "mistral", fmt.Sprintf(`,"sliding_window":%d`, w)
	if !all {
		typ = "gemma2"
	}
	a, err := ParseConfig("w.json", []byte(fmt.Sprintf(windowBase, typ, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A window wider than every context changes nothing (chunks of odd
// lengths: PrefillAttn's n·(ctx + (n+1)/2) is then the exact count); a narrow one makes
// long prompts and long decodes cheaper on its layers only, and the engine's
// sums and the mean form agree for a batch of equal requests.
func TestWindowStep(t *testing.T) {
	full := mustArch(t, fmt.Sprintf(windowBase, "llama", ""))
	for _, gpu := range []string{"h100", "a100-80gb", "l40s"} {
		g, _ := LookupGPU(gpu)
		rf, _ := New(full, g, 1)
		wide, _ := New(windowArch(t, 1<<20, true), g, 1)
		half, _ := New(windowArch(t, 128, false), g, 1)
		all, _ := New(windowArch(t, 128, true), g, 1)
		if rf.Window() != 0 || wide.Window() != 1<<20 || half.Window() != 128 {
			t.Fatalf("%s: windows %d %d %d", gpu, rf.Window(), wide.Window(), half.Window())
		}
		for _, b := range []latency.Batch{
			{PrefillSeqs: 1, PrefillTokens: 8191, PrefillAttn: 8191 * 4096},
			{PrefillSeqs: 2, PrefillTokens: 1002, PrefillCtx: 3000, PrefillAttn: 2 * 501 * (1500 + 251)},
			{DecodeSeqs: 64, DecodeCtx: 64 * 5000},
			{PrefillSeqs: 1, PrefillTokens: 511, PrefillCtx: 7000, PrefillAttn: 511 * (7000 + 256), DecodeSeqs: 30, DecodeCtx: 30 * 2000},
		} {
			fullT, wideT, halfT, allT := rf.Terms(&b), wide.Terms(&b), half.Terms(&b), all.Terms(&b)
			if wideT != fullT {
				t.Errorf("%s %+v: a window wider than the context costs %+v, full attention %+v", gpu, b, wideT, fullT)
			}
			if !(allT.TotalUS < halfT.TotalUS && halfT.TotalUS < fullT.TotalUS) {
				t.Errorf("%s %+v: all layers windowed %.1f µs, half %.1f, none %.1f: want increasing", gpu, b, allT.TotalUS, halfT.TotalUS, fullT.TotalUS)
			}
			// Half the layers windowed: the attention terms sit halfway.
			if d := (fullT.AttnFLOPs + allT.AttnFLOPs) / 2; math.Abs(halfT.AttnFLOPs-d) > 1e-9*d {
				t.Errorf("%s %+v: half-windowed attention FLOPs %v, want the mean %v", gpu, b, halfT.AttnFLOPs, d)
			}
			// The sums the engine gives equal the mean form for equal requests.
			e := b
			s := int64(max(b.PrefillSeqs, 1))
			c, n := b.PrefillCtx/s, b.PrefillTokens/s
			e.PrefillAttnW = s * latency.WindowPairs(c, n, 128)
			e.PrefillCtxW = s * min(c, 127)
			e.DecodeCtxW = int64(b.DecodeSeqs) * min(b.DecodeCtx/int64(max(b.DecodeSeqs, 1)), 127)
			if got := all.Terms(&e); math.Abs(got.TotalUS-allT.TotalUS) > 1e-9*allT.TotalUS {
				t.Errorf("%s %+v: with the sums given %v µs, by the mean %v", gpu, b, got.TotalUS, allT.TotalUS)
			}
		}
		// A windowed layer's prefill is linear in the prompt: 16k tokens
		// cost twice 8k, where full attention's quadratic term shows.
		p8, p16 := latency.Batch{PrefillSeqs: 1, PrefillTokens: 8192}, latency.Batch{PrefillSeqs: 1, PrefillTokens: 16384}
		var w8, w16, f8, f16 Terms
		all.attnLayers(&w8, &p8, 8192, 1, float64(latency.WindowPairs(0, 8192, 128)), 0, 0, 128)
		all.attnLayers(&w16, &p16, 16384, 1, float64(latency.WindowPairs(0, 16384, 128)), 0, 0, 128)
		rf.attnLayers(&f8, &p8, 8192, 1, 8192*8193/2, 0, 0, 0)
		rf.attnLayers(&f16, &p16, 16384, 1, 16384*16385/2, 0, 0, 0)
		if r := w16.RoofUS / w8.RoofUS; r < 1.9 || r > 2.1 {
			t.Errorf("%s: windowed prefill attention 16k/8k = %.3f, want about 2", gpu, r)
		}
		if r := f16.RoofUS / f8.RoofUS; r < 3 {
			t.Errorf("%s: full prefill attention 16k/8k = %.3f, want near 4", gpu, r)
		}
	}
}

// FlashAttention with a window: a CTA walks at most its rows plus the
// window's keys, one tile more when the window starts inside a block; the
// work follows the windowed pairs.
func TestFlashWindow(t *testing.T) {
	g, _ := LookupGPU("h100")
	f := newFlash(&g, 64, 8, 64) // gpt-oss-120b at TP 1: 192 × 128 tiles, 24 positions per block
	pairs := float64(latency.WindowPairs(0, 8192, 128))
	got := f.us(1, 8192, 0, pairs, 128)
	// By hand: 342 blocks × 8 KV heads; tiles per head = pairs·8/(192·128)
	// + 342 × (½(1 + 24/128) + ½); the longest CTA ⌈(24+127)/128⌉ + 1 = 3
	// tiles, far below the spread.
	blocks := math.Ceil(8192 * 8 / 192.0)
	tiles := 8 * (pairs*8/(192*128) + blocks*(0.5*(1+24.0/128)+0.5))
	ctas := 8 * blocks
	work := ctas*f.ctaUS + tiles*f.tileUS
	waves := ctas / f.slots
	short := f.ctaUS + math.Min(math.Ceil(24/128.0), 3)*f.tileUS
	want := math.Max(f.ctaUS+3*f.tileUS, work/f.slots+(math.Ceil(waves)-waves)*short)
	if math.Abs(got-want) > 1e-9*want {
		t.Errorf("windowed 8k prefill: %v µs, by hand %v", got, want)
	}
	// The CTAs' fixed cost (cta_us) and edge tiles dominate what is left.
	if full := f.us(1, 8192, 0, 8192*8193/2, 0); !(got < full/4) {
		t.Errorf("windowed 8k prefill %v µs, full %v: want a fraction", got, full)
	}
	// A window wider than the prompt is the causal kernel.
	if a, b := f.us(2, 2048, 0, 2*1024*1025/2, 4096), f.us(2, 2048, 0, 2*1024*1025/2, 0); a != b {
		t.Errorf("window wider than the prompt: %v µs, causal %v", a, b)
	}
}

// Leaping prices windowed decodes with min(ctx, seqs·(W−1)): the ramp and
// DecodeCost are StepTime and Terms exactly, on both sides of the window,
// with every layer windowed (no full layer) and half of them.
func TestWindowDecodeCostExact(t *testing.T) {
	g, _ := LookupGPU("h100")
	for _, all := range []bool{true, false} {
		r, err := New(windowArch(t, 128, all), g, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, seqs := range []int{1, 7, 64} {
			ramp, cost := r.DecodeRamp(seqs), r.DecodeCost(seqs)
			prev := int64(0)
			for _, per := range []int64{0, 1, 100, 126, 127, 128, 129, 1000, 100000} {
				for _, d := range []int64{-1, 0, 1} {
					ctx := max(0, per*int64(seqs)+d)
					b := latency.Batch{DecodeSeqs: seqs, DecodeCtx: ctx}
					want := r.Terms(&b)
					if c, m, tot := cost.At(ctx); c != want.ComputeUS || m != want.MemoryUS || tot != want.TotalUS {
						t.Fatalf("all %v, %d seqs, ctx %d: DecodeCost %v %v %v, Terms %v %v %v", all, seqs, ctx, c, m, tot, want.ComputeUS, want.MemoryUS, want.TotalUS)
					}
					if st := ramp(ctx); st != r.StepTime(&b) || st < prev {
						t.Fatalf("all %v, %d seqs, ctx %d: ramp %d, StepTime %d, previous %d", all, seqs, ctx, st, r.StepTime(&b), prev)
					}
					prev = ramp(ctx)
				}
			}
			// Past the window, more context costs nothing on an all-windowed model.
			if all && ramp(int64(seqs)*5000) != ramp(int64(seqs)*127) {
				t.Errorf("%d seqs: decode at 5,000 tokens %d µs, at the window %d", seqs, ramp(int64(seqs)*5000), ramp(int64(seqs)*127))
			}
		}
	}
}
