package roofline

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Published parameter counts (model cards) vs what the parser derives.
// Vision towers are not counted (Llama 4 Scout: 109B total with vision).
func TestCatalogue(t *testing.T) {
	cases := []struct {
		name                 string
		layers, moeLayers    int
		mla                  bool
		weight               Dtype
		totalB, activeB, tol float64
	}{
		{"llama-3.1-8b", 32, 0, false, BF16, 8.03, 0, 0.01},
		{"llama-3.1-70b", 80, 0, false, BF16, 70.6, 0, 0.01},
		{"llama-2-70b", 80, 0, false, FP16, 69.0, 0, 0.01},
		{"qwen3-30b-a3b", 48, 48, false, BF16, 30.5, 3.3, 0.1},
		{"mixtral-8x7b", 32, 32, false, BF16, 46.7, 12.9, 0.02},
		{"deepseek-v2-lite", 27, 26, true, BF16, 15.7, 2.4, 0.05},
		{"llama-4-scout-fp8", 48, 48, false, FP8, 107.8, 17, 0.07},
		{"glm-5.2-fp8", 78, 75, true, FP8, 0, 0, 0},
		{"qwen3-32b", 64, 0, false, BF16, 32.8, 0, 0.01},
		{"gpt-oss-120b", 36, 36, false, FP4, 116.8, 5.1, 0.01},
	}
	for _, c := range cases {
		a, err := LoadModel(c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if a.Layers != c.layers || a.MoELayers != c.moeLayers || a.MLA() != c.mla || a.WeightDtype != c.weight {
			t.Errorf("%s: layers %d moe %d mla %v weight %s; want %d %d %v %s", c.name, a.Layers, a.MoELayers, a.MLA(), a.WeightDtype, c.layers, c.moeLayers, c.mla, c.weight)
		}
		if c.totalB > 0 && math.Abs(a.TotalParams()/1e9-c.totalB)/c.totalB > c.tol {
			t.Errorf("%s: total params %.2fB, published %.1fB", c.name, a.TotalParams()/1e9, c.totalB)
		}
		if c.activeB > 0 && math.Abs(a.ActiveParams()/1e9-c.activeB)/c.activeB > c.tol {
			t.Errorf("%s: active params %.2fB, published %.1fB", c.name, a.ActiveParams()/1e9, c.activeB)
		}
	}
	// Every alias resolves, ids too, and the short name is what ModelKey returns.
	for _, m := range Models {
		for _, n := range append([]string{m.ID, strings.ToUpper(m.ID)}, m.Aliases...) {
			if got := ModelKey(n); got != m.ShortName() {
				t.Errorf("ModelKey(%q) = %q, want %q", n, got, m.ShortName())
			}
		}
	}
	if got := ModelKey("Org/Some-Model"); got != "org--some-model" {
		t.Errorf("ModelKey(uncatalogued) = %q", got)
	}
}

func TestLoadModelPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(denseJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "config.json")} {
		a, err := LoadModel(p)
		if err != nil || a.Hidden != 1024 {
			t.Errorf("LoadModel(%s) = %v, %v", p, a, err)
		}
	}
	if _, err := LoadModel(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "not in the catalogue") {
		t.Errorf("missing model error = %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ name, js, want string }{
		{"not json", `{`, "not a valid config.json"},
		{"missing hidden", `{"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4}`, "field hidden_size: expected a positive integer, found nothing (field missing)"},
		{"zero layers", `{"hidden_size":64,"num_hidden_layers":0,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4}`, "field num_hidden_layers: expected a positive integer, found 0"},
		{"kv heads not divisor", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":3,"intermediate_size":4,"vocab_size":4}`, "field num_key_value_heads: expected a divisor of num_attention_heads (8), found 3"},
		{"wrong type", `{"hidden_size":"big","num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4}`, "hidden_size"},
		{"topk > experts", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"num_local_experts":4,"num_experts_per_tok":5}`, "field num_experts_per_tok: expected at most num_local_experts (4), found 5"},
		{"experts no topk", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"num_experts":4}`, "field num_experts_per_tok: expected a positive integer, found nothing"},
		{"mla missing rope", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"kv_lora_rank":16,"qk_nope_head_dim":8,"v_head_dim":8}`, "field qk_rope_head_dim"},
		{"bad dtype", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"torch_dtype":"int3"}`, `field torch_dtype: expected bfloat16, float16 or float32, found "int3"`},
		{"bad quant", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"quantization_config":{"quant_method":"magic"}}`, `field quantization_config.quant_method`},
		{"first_k too big", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"n_routed_experts":4,"num_experts_per_tok":1,"first_k_dense_replace":3}`, "field first_k_dense_replace: expected 0..2, found 3"},
		{"absurd layers", `{"hidden_size":64,"num_hidden_layers":2000000000,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4}`, "field num_hidden_layers: expected at most 16777216, found 2000000000"},
		{"explicit zero head_dim", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"head_dim":0,"intermediate_size":4,"vocab_size":4}`, "field head_dim: expected a positive integer, found 0"},
		{"mlp_only out of range", `{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"num_experts":4,"num_experts_per_tok":1,"mlp_only_layers":[5]}`, "field mlp_only_layers"},
	}
	for _, c := range cases {
		_, err := ParseConfig("cfg.json", []byte(c.js))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "cfg.json") {
			t.Errorf("%s: error = %v, want it to start with cfg.json and contain %q", c.name, err, c.want)
		}
	}
}

func TestQuantAndInterleave(t *testing.T) {
	base := `"hidden_size":64,"num_hidden_layers":4,"num_attention_heads":8,"intermediate_size":32,"vocab_size":10`
	ct := func(w, in string) string {
		g := `"weights":` + w
		if in != "" {
			g += `,"input_activations":` + in
		}
		return `{` + base + `,"quantization_config":{"quant_method":"compressed-tensors","config_groups":{"g":{` + g + `}}}}`
	}
	cases := []struct {
		js       string
		weight   Dtype
		math     Dtype // tensor-core precision of the quantised GEMMs
		keepAttn bool
		moe      int
	}{
		{`{` + base + `,"quantization_config":{"quant_method":"awq","bits":4}}`, INT4, BF16, false, 0},
		{`{` + base + `,"quantization_config":{"quant_method":"modelopt","quant_algo":"NVFP4"}}`, FP4, FP4, false, 0},
		{`{` + base + `,"quantization_config":{"quant_method":"modelopt","quant_algo":"FP8","exclude_modules":["lm_head"]}}`, FP8, FP8, false, 0},
		{`{` + base + `,"quantization_config":{"quant_method":"fp8"}}`, FP8, FP8, false, 0},
		// gpt-oss: MXFP4 experts run with BF16 activations; attention kept BF16.
		{`{` + base + `,"quantization_config":{"quant_method":"mxfp4","modules_to_not_convert":["model.layers.*.self_attn","lm_head"]}}`, FP4, BF16, true, 0},
		{`{` + base + `,"quantization_config":{"quant_method":"mxfp4"}}`, FP4, BF16, false, 0},
		{ct(`{"num_bits":4,"type":"int"}`, ""), INT4, BF16, false, 0},
		{ct(`{"num_bits":8,"type":"int"}`, ""), INT8, BF16, false, 0},
		{ct(`{"num_bits":8,"type":"int"}`, `{"num_bits":8,"type":"int"}`), INT8, INT8, false, 0},
		{ct(`{"num_bits":8,"type":"float"}`, `{"num_bits":8,"type":"float"}`), FP8, FP8, false, 0},
		{ct(`{"num_bits":4,"type":"float"}`, `{"num_bits":4,"type":"float"}`), FP4, FP4, false, 0},
		// A vision tower's attention in the ignore list does not count.
		{`{` + base + `,"quantization_config":{"quant_method":"compressed-tensors","ignore":["vision_model.layers.0.self_attn.q_proj","lm_head"],"config_groups":{"g":{"weights":{"num_bits":8,"type":"float"},"input_activations":{"num_bits":8,"type":"float"}}}}}`, FP8, FP8, false, 0},
		{`{` + base + `,"quantization_config":{"quant_method":"compressed-tensors","ignore":["language_model.model.layers.0.self_attn.q_proj"],"config_groups":{"g":{"weights":{"num_bits":8,"type":"float"},"input_activations":{"num_bits":8,"type":"float"}}}}}`, FP8, FP8, true, 0},
		{`{` + base + `,"num_experts":8,"num_experts_per_tok":2,"decoder_sparse_step":2}`, BF16, BF16, false, 2},
		{`{` + base + `,"num_experts":8,"num_experts_per_tok":2,"mlp_only_layers":[0]}`, BF16, BF16, false, 3},
		{`{` + base + `,"model_type":"llama4_text","num_local_experts":8,"num_experts_per_tok":1,"interleave_moe_layer_step":2}`, BF16, BF16, false, 2},
		{`{` + base + `,"n_routed_experts":8,"num_experts_per_tok":2,"first_k_dense_replace":1,"moe_layer_freq":1}`, BF16, BF16, false, 3},
	}
	for i, c := range cases {
		a, err := ParseConfig("q.json", []byte(c.js))
		if err != nil {
			t.Errorf("case %d: %v", i, err)
			continue
		}
		if a.WeightDtype != c.weight || a.Math() != c.math || a.AttnUnquantized != c.keepAttn || a.MoELayers != c.moe {
			t.Errorf("case %d: weight %s math %s keep attention %v moe %d, want %s %s %v %d", i, a.WeightDtype, a.Math(), a.AttnUnquantized, a.MoELayers, c.weight, c.math, c.keepAttn, c.moe)
		}
	}
	// Llama 4 adds one shared expert of the routed width.
	a, _ := LoadModel("llama-4-scout")
	if a.SharedIntermediate != 8192 || a.ExpertIntermediate != 8192 || a.Intermediate != 16384 {
		t.Errorf("llama-4-scout widths: shared %d expert %d dense %d", a.SharedIntermediate, a.ExpertIntermediate, a.Intermediate)
	}
	d, _ := LoadModel("deepseek-v2-lite")
	if d.SharedIntermediate != 2*1408 || d.KVBytesPerTokenRank(8) != float64((512+64)*27*2) {
		t.Errorf("deepseek-v2-lite: shared %d, kv/token/rank %v", d.SharedIntermediate, d.KVBytesPerTokenRank(8))
	}
}

func TestGPUCatalogue(t *testing.T) {
	for _, n := range []string{"h100", "H100", "h100_sxm", "h200", "b200", "gb200", "a100-80gb", "A100-80", "l40s", "rtx4090", "rtxpro6000"} {
		g, ok := LookupGPU(n)
		if !ok {
			t.Errorf("LookupGPU(%q) missing", n)
			continue
		}
		if err := g.Validate(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	a, _ := LookupGPU("a100")
	if a.PeakTFLOPS(FP8) != 312 {
		t.Errorf("A100 fp8 weights should run at bf16 rate, got %v", a.PeakTFLOPS(FP8))
	}
	b, _ := LookupGPU("b200")
	if b.PeakTFLOPS(FP4) != 9000 || b.PeakTFLOPS(INT4) != 2250 {
		t.Errorf("B200 peaks fp4 %v int4 %v", b.PeakTFLOPS(FP4), b.PeakTFLOPS(INT4))
	}
}

func TestGPUYAML(t *testing.T) {
	good := "name: mi300x\nbf16_tflops: 1307\nfp8_tflops: 2615\nhbm_tb_s: 5.3\nmemory_gib: 192\nlink_gb_s: 64\nlink_latency_us: 10\n"
	g, err := ParseGPU("mi300x.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if g.Eff.GEMM != h100Eff.GEMM {
		t.Errorf("unset efficiency should default to the H100 profile, got %+v", g.Eff)
	}
	g2, err := ParseGPU("x.yaml", []byte(good+"efficiency:\n  gemm: 0.6\n  attention: 0.5\n  memory: 0.9\n  link: 0.5\n"))
	if err != nil || g2.Eff.GEMM != 0.6 {
		t.Errorf("efficiency override: %+v %v", g2.Eff, err)
	}
	for _, c := range []struct{ doc, want string }{
		// Keys are named in the user's words, never as Go types (roofline.GPU).
		{good + "hbm_tbs: 3\n", "bad.yaml:8: hbm_tbs: unknown key; did you mean hbm_tb_s? (expected one of name, aliases, bf16_tflops, fp8_tflops, fp4_tflops, hbm_tb_s, memory_gib, link_gb_s, link_latency_us, host_link_gb_s, sms, clock_mhz, smem_kib, efficiency, source)"},
		{good + "efficiency:\n  gem: 0.6\n", "bad.yaml:9: efficiency.gem: unknown key; did you mean gemm?"},
		{strings.Replace(good, "hbm_tb_s: 5.3", "hbm_tb_s: fast", 1), `bad.yaml:4: hbm_tb_s: expected a number, found "fast"`},
		{good + "aliases: mi300\n", `bad.yaml:8: aliases: expected a list, found "mi300"`},
		{strings.Replace(good, "hbm_tb_s: 5.3", "hbm_tb_s: 0", 1), "field hbm_tb_s: expected a finite positive number, found 0"},
		{good + "efficiency:\n  kernel_us: .inf\n", "field efficiency.kernel_us: expected a finite non-negative number, found +Inf"},
		{good + "efficiency:\n  gemm: 1.5\n", "field efficiency.gemm: expected a fraction in (0,1], found 1.5"},
		{good + "efficiency:\n  seq_step_overhead_us: -1\n", "field efficiency.seq_step_overhead_us: expected a finite non-negative number, found -1"},
		{good + "efficiency:\n  tp_host_overhead_us: -5\n", "field efficiency.tp_host_overhead_us: expected a finite non-negative number, found -5"},
		{good + "efficiency:\n  mxfp4_moe:\n    layer_us: 5\n", "field efficiency.mxfp4_moe: expected weight_rate > 0 and gemm in (0,1] (or no mxfp4_moe at all), found weight_rate 0, gemm 0"},
		{good + "efficiency:\n  mxfp4_moe:\n    weight_rate: -1\n", "field efficiency.mxfp4_moe.weight_rate: expected a finite non-negative number, found -1"},
		{good + "efficiency:\n  mxfp4_moe:\n    gemm: 2\n", "field efficiency.mxfp4_moe: expected weight_rate > 0 and gemm in (0,1]"},
		{strings.Replace(good, "name: mi300x", "", 1), "field name"},
		{"", "bad.yaml: empty file, expected a GPU YAML document"},
		{"# only a comment\n", "bad.yaml: empty file, expected a GPU YAML document"},
	} {
		if _, err := ParseGPU("bad.yaml", []byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error = %v, want %q", err, c.want)
		}
	}
	if _, err := LoadGPU("h10"); err == nil || !strings.HasPrefix(err.Error(), `did you mean h100? (gpu "h10": not built in`) {
		t.Errorf("a near miss: %v", err)
	}
	if _, err := LoadGPU("tpu-v9"); err == nil || !strings.Contains(err.Error(), "not built in") {
		t.Errorf("unknown gpu error = %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	_ = fs.WalkDir(modelFS, "models", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := modelFS.ReadFile(p)
			f.Add(data)
		}
		return nil
	})
	f.Add([]byte(denseJSON))
	f.Add([]byte(moeJSON))
	f.Add([]byte(`{"model_type":"qwen2","hidden_size":64,"num_hidden_layers":4,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"sliding_window":16,"use_sliding_window":true,"max_window_layers":1}`))
	f.Add([]byte(`{"model_type":"gemma3_text","hidden_size":64,"num_hidden_layers":4,"num_attention_heads":8,"intermediate_size":4,"vocab_size":4,"sliding_window":16,"sliding_window_pattern":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseConfig("fuzz.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if a.Hidden <= 0 || a.Layers <= 0 || a.Heads <= 0 || a.KVHeads <= 0 || a.Vocab <= 0 || a.MoELayers > a.Layers {
			t.Fatalf("accepted invalid arch %+v", a)
		}
		if !a.MLA() && a.HeadDim <= 0 {
			t.Fatalf("accepted head_dim %d", a.HeadDim)
		}
		if a.WeightDtype.Bytes() == 0 || a.KVDtype.Bytes() == 0 {
			t.Fatalf("accepted dtype %q/%q", a.WeightDtype, a.KVDtype)
		}
		if a.Window < 0 || a.WindowLayers < 0 || a.WindowLayers > a.Layers || (a.Window == 0) != (a.WindowLayers == 0) {
			t.Fatalf("accepted sliding window %d on %d of %d layers", a.Window, a.WindowLayers, a.Layers)
		}
		_ = a.TotalParams()
		_ = a.KVBytesPerTokenRank(3)
	})
}

func TestGPURanges(t *testing.T) {
	good := "name: x\nbf16_tflops: 100\nhbm_tb_s: 2\nmemory_gib: 80\nlink_gb_s: 50\nlink_latency_us: 5\n"
	for _, c := range []struct{ doc, want string }{
		{strings.Replace(good, "hbm_tb_s: 2", "hbm_tb_s: 1e-300", 1), "x.yaml: field hbm_tb_s: expected 0.01 to 10000, found 1e-300"},
		{strings.Replace(good, "hbm_tb_s: 2", "hbm_tb_s: 2000000", 1), "x.yaml: field hbm_tb_s: expected 0.01 to 10000, found 2e+06"},
		{strings.Replace(good, "bf16_tflops: 100", "bf16_tflops: 0.001", 1), "x.yaml: field bf16_tflops: expected 0.1 to 1e+06, found 0.001"},
		{strings.Replace(good, "memory_gib: 80", "memory_gib: 1e15", 1), "x.yaml: field memory_gib: expected 0.1 to 1e+06, found 1e+15"},
	} {
		if _, err := ParseGPU("x.yaml", []byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error = %v, want %q", err, c.want)
		}
	}
	if _, err := ParseGPU("x.yaml", []byte(good)); err != nil {
		t.Errorf("good GPU: %v", err)
	}
}

// FuzzParseGPU: a GPU YAML either fails naming the file or gives a GPU the
// step model can use (positive peaks, fractions in (0,1], finite floors).
func FuzzParseGPU(f *testing.F) {
	f.Add([]byte("name: mi300x\nbf16_tflops: 1307\nfp8_tflops: 2615\nhbm_tb_s: 5.3\nmemory_gib: 192\nlink_gb_s: 64\nlink_latency_us: 10\n"))
	f.Add([]byte("name: x\nbf16_tflops: 100\nhbm_tb_s: 2\nmemory_gib: 80\nlink_gb_s: 50\nlink_latency_us: 5\nefficiency:\n  gemm: 0.7\n  link: 0.25\n  seq_step_overhead_us: 40\n  tp_step_overhead_us: 1700\n  tp_host_overhead_us: 900\n  mxfp4_moe:\n    layer_us: 20\n    weight_rate: 8\n    gemm: 0.5\n"))
	f.Add([]byte("name: y\nbf16_tflops: 1e6\nhbm_tb_s: 1e4\nmemory_gib: 1e6\nefficiency:\n  seq_step_overhead_us: 1e300\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseGPU("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		e := g.Eff
		for _, v := range []float64{e.GEMM, e.Attention, e.Memory, e.Link} {
			if !(v > 0 && v <= 1) {
				t.Fatalf("accepted efficiency %v in %+v", v, e)
			}
		}
		for _, v := range []float64{e.KernelUS, e.AttnUS, e.LayerUS, e.StepUS, e.TPStepUS, e.TPHostUS, e.SeqStepUS, e.TokenizeUS, e.ReserveGiB, g.LinkGBps, g.LinkLatUS, e.MXFP4MoE.LayerUS} {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("accepted %v in %+v", v, g)
			}
		}
		if m := e.MXFP4MoE; m != (MoEKernel{}) && !(m.WeightRate > 0 && !math.IsInf(m.WeightRate, 0) && m.GEMM > 0 && m.GEMM <= 1) {
			t.Fatalf("accepted MoE kernel %+v", m)
		}
		if g.Name == "" || !(g.BF16TFLOPS >= 0.1) || !(g.HBMTBps >= 0.01) {
			t.Fatalf("accepted %+v", g)
		}
	})
}
