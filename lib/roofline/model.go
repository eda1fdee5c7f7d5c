package roofline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Arch is the transformer shape the roofline needs, read from a HuggingFace
// config.json. All sizes are element counts; dtypes give bytes per element.
type Arch struct {
	Name         string // catalogue id or path it was loaded from
	ModelType    string // config.json model_type
	Hidden       int
	Layers       int
	Heads        int
	KVHeads      int
	HeadDim      int
	Intermediate int // dense-layer MLP width
	Vocab        int
	TiedEmbed    bool

	// MoE. MoELayers of the Layers use experts; the rest are dense.
	Experts            int
	ExpertsPerTok      int
	ExpertIntermediate int
	SharedIntermediate int // Σ widths of always-on shared experts (0 = none)
	MoELayers          int

	// MLA (DeepSeek-style latent attention) when KVLoraRank > 0.
	QLoraRank  int
	KVLoraRank int
	QKNopeDim  int
	QKRopeDim  int
	VHeadDim   int

	// Sliding-window attention: WindowLayers of the Layers attend over the
	// last Window positions only (a query at position p sees keys
	// max(0, p−Window+1)..p); the rest attend over the whole context.
	// Window 0: every layer is full (WindowLayers is then 0).
	Window       int
	WindowLayers int

	// WeightDtype stores the linear layers a quantised checkpoint quantises
	// (all of them when it is not quantised). MathDtype is the precision
	// their matrix multiplies run at ("" = WeightDtype's own, see Math): a
	// weight-only format dequantises to the activation dtype in the kernel.
	// AttnUnquantized: the checkpoint leaves the attention projections in
	// ActDtype. The embedding, LM head and MoE router are always ActDtype
	// (vLLM quantises neither its vocab-parallel layers nor the router for
	// the formats read here).
	WeightDtype     Dtype
	MathDtype       Dtype
	AttnUnquantized bool
	KVDtype         Dtype
	ActDtype        Dtype // activations exchanged in all-reduce
}

// Math is the tensor-core input precision of the quantised GEMMs.
func (a *Arch) Math() Dtype {
	if a.MathDtype != "" {
		return a.MathDtype
	}
	return mathFor(a.WeightDtype)
}

// mathFor is how vLLM runs weights stored in d when the checkpoint does not
// say otherwise: FP8, INT8 and FP4 with activations quantised alike
// (W8A8, W4A4); 4-bit integers weight-only, in the activation dtype.
func mathFor(d Dtype) Dtype {
	if d == INT4 {
		return BF16
	}
	return d
}

// SetWeightDtype stores the quantised layers in d (a --weight-dtype
// override). The checkpoint's own dtype keeps its own math; another dtype
// runs the way vLLM runs it by default (mathFor).
func (a *Arch) SetWeightDtype(d Dtype) {
	if d == a.WeightDtype {
		return
	}
	a.WeightDtype, a.MathDtype = d, ""
}

// AttnDtype stores the attention projections.
func (a *Arch) AttnDtype() Dtype {
	if a.AttnUnquantized {
		return a.ActDtype
	}
	return a.WeightDtype
}

// MLA reports whether attention is DeepSeek-style multi-head latent attention.
func (a *Arch) MLA() bool { return a.KVLoraRank > 0 }

// MoE reports whether any layer routes to experts.
func (a *Arch) MoE() bool { return a.MoELayers > 0 }

// DenseLayers is the number of layers with a dense MLP.
func (a *Arch) DenseLayers() int { return a.Layers - a.MoELayers }

// ConfigError names the config file and field that is wrong.
type ConfigError struct {
	Path, Field, Expected, Found string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: field %s: expected %s, found %s", e.Path, e.Field, e.Expected, e.Found)
}

// hfConfig holds the config.json keys we read. Pointers distinguish absent from zero.
type hfConfig struct {
	ModelType          string          `json:"model_type"`
	Architectures      []string        `json:"architectures"`
	TextConfig         json.RawMessage `json:"text_config"`
	HiddenSize         *int            `json:"hidden_size"`
	NumLayers          *int            `json:"num_hidden_layers"`
	NumHeads           *int            `json:"num_attention_heads"`
	NumKVHeads         *int            `json:"num_key_value_heads"`
	HeadDim            *int            `json:"head_dim"`
	Intermediate       *int            `json:"intermediate_size"`
	IntermediateMLP    *int            `json:"intermediate_size_mlp"` // Llama 4 dense layers
	VocabSize          *int            `json:"vocab_size"`
	TieEmbed           *bool           `json:"tie_word_embeddings"`
	NumLocalExperts    *int            `json:"num_local_experts"`
	NumExperts         *int            `json:"num_experts"`
	NRoutedExperts     *int            `json:"n_routed_experts"`
	ExpertsPerTok      *int            `json:"num_experts_per_tok"`
	MoEIntermediate    *int            `json:"moe_intermediate_size"`
	NSharedExperts     *int            `json:"n_shared_experts"`
	SharedExpertInter  *int            `json:"shared_expert_intermediate_size"`
	FirstKDense        *int            `json:"first_k_dense_replace"`
	MoELayerFreq       *int            `json:"moe_layer_freq"`
	DecoderSparseStep  *int            `json:"decoder_sparse_step"`
	MLPOnlyLayers      []int           `json:"mlp_only_layers"`
	InterleaveMoEStep  *int            `json:"interleave_moe_layer_step"`
	QLoraRank          *int            `json:"q_lora_rank"`
	KVLoraRank         *int            `json:"kv_lora_rank"`
	QKNopeDim          *int            `json:"qk_nope_head_dim"`
	QKRopeDim          *int            `json:"qk_rope_head_dim"`
	VHeadDim           *int            `json:"v_head_dim"`
	SlidingWindow      *int            `json:"sliding_window"`
	UseSlidingWindow   *bool           `json:"use_sliding_window"`     // Qwen2/3: false turns sliding_window off
	MaxWindowLayers    *int            `json:"max_window_layers"`      // Qwen2/3: layers from this index on slide
	SlidingPattern     *int            `json:"sliding_window_pattern"` // Gemma 3, Cohere 2: every N-th layer is full
	LayerTypes         []string        `json:"layer_types"`
	TorchDtype         string          `json:"torch_dtype"`
	Dtype              string          `json:"dtype"`
	QuantizationConfig json.RawMessage `json:"quantization_config"`
}

type quantConfig struct {
	QuantMethod  string `json:"quant_method"`
	QuantAlgo    string `json:"quant_algo"` // modelopt
	Bits         *int   `json:"bits"`       // gptq / awq
	WBit         *int   `json:"w_bit"`      // awq
	Format       string `json:"format"`     // compressed-tensors
	ConfigGroups map[string]struct {
		Weights         *quantTensor `json:"weights"`
		InputActivation *quantTensor `json:"input_activations"`
	} `json:"config_groups"`
	// Modules left in the checkpoint's own dtype: mxfp4 and bitsandbytes
	// (modules_to_not_convert), compressed-tensors (ignore), modelopt
	// (exclude_modules).
	ModulesToNotConvert []string `json:"modules_to_not_convert"`
	Ignore              []string `json:"ignore"`
	ExcludeModules      []string `json:"exclude_modules"`
}

type quantTensor struct {
	NumBits int    `json:"num_bits"`
	Type    string `json:"type"`
}

// quantized is what a quantization_config says about the linear layers.
type quantized struct {
	weight, math    Dtype // math "" = mathFor(weight)
	attnUnquantized bool
}

// maxDim bounds every size read from a config: far above any real model,
// low enough that products stay exact in float64 and loops over layers stay short.
const maxDim = 1 << 24

// ParseConfig reads a HuggingFace config.json. path is only used in errors.
func ParseConfig(path string, data []byte) (*Arch, error) {
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: not a valid config.json: %w", path, err)
	}
	top := c
	// Multimodal wrappers (Llama 4, Qwen-VL, ...) keep the language model in text_config.
	if len(bytes.TrimSpace(c.TextConfig)) > 0 && !bytes.Equal(bytes.TrimSpace(c.TextConfig), []byte("null")) {
		var t hfConfig
		if err := json.Unmarshal(c.TextConfig, &t); err != nil {
			return nil, fmt.Errorf("%s: field text_config: %w", path, err)
		}
		if t.TorchDtype == "" && t.Dtype == "" {
			t.TorchDtype, t.Dtype = top.TorchDtype, top.Dtype
		}
		if len(t.QuantizationConfig) == 0 {
			t.QuantizationConfig = top.QuantizationConfig
		}
		if t.ModelType == "" {
			t.ModelType = top.ModelType
		}
		c = t
	}
	a := &Arch{Name: path, ModelType: c.ModelType}
	bad := func(field, expected, found string) error {
		return &ConfigError{Path: path, Field: field, Expected: expected, Found: found}
	}
	// req reads a required positive integer; opt an optional one (def when absent).
	req := func(field string, p *int, dst *int) error {
		if p == nil {
			return bad(field, "a positive integer", "nothing (field missing)")
		}
		if *p <= 0 {
			return bad(field, "a positive integer", fmt.Sprint(*p))
		}
		if *p > maxDim {
			return bad(field, fmt.Sprintf("at most %d", maxDim), fmt.Sprint(*p))
		}
		*dst = *p
		return nil
	}
	opt := func(field string, p *int, def int, dst *int) error {
		if p == nil {
			*dst = def
			return nil
		}
		if *p < 0 {
			return bad(field, "a non-negative integer", fmt.Sprint(*p))
		}
		if *p > maxDim {
			return bad(field, fmt.Sprintf("at most %d", maxDim), fmt.Sprint(*p))
		}
		*dst = *p
		return nil
	}
	for _, f := range []struct {
		name string
		p    *int
		dst  *int
	}{
		{"hidden_size", c.HiddenSize, &a.Hidden},
		{"num_hidden_layers", c.NumLayers, &a.Layers},
		{"num_attention_heads", c.NumHeads, &a.Heads},
		{"intermediate_size", c.Intermediate, &a.Intermediate},
		{"vocab_size", c.VocabSize, &a.Vocab},
	} {
		if err := req(f.name, f.p, f.dst); err != nil {
			return nil, err
		}
	}
	if err := opt("num_key_value_heads", c.NumKVHeads, a.Heads, &a.KVHeads); err != nil {
		return nil, err
	}
	if a.KVHeads == 0 || a.KVHeads > a.Heads || a.Heads%a.KVHeads != 0 {
		return nil, bad("num_key_value_heads", fmt.Sprintf("a divisor of num_attention_heads (%d)", a.Heads), fmt.Sprint(a.KVHeads))
	}
	defHead := 0
	if a.Hidden%a.Heads == 0 {
		defHead = a.Hidden / a.Heads
	}
	if err := opt("head_dim", c.HeadDim, defHead, &a.HeadDim); err != nil {
		return nil, err
	}
	if c.IntermediateMLP != nil && *c.IntermediateMLP > 0 {
		// Llama 4: intermediate_size is the expert width, intermediate_size_mlp the dense one.
		a.Intermediate = *c.IntermediateMLP
	}
	if c.TieEmbed != nil {
		a.TiedEmbed = *c.TieEmbed
	}

	// MLA.
	if err := opt("kv_lora_rank", c.KVLoraRank, 0, &a.KVLoraRank); err != nil {
		return nil, err
	}
	if a.KVLoraRank > 0 {
		if err := opt("q_lora_rank", c.QLoraRank, 0, &a.QLoraRank); err != nil {
			return nil, err
		}
		for _, f := range []struct {
			name string
			p    *int
			dst  *int
		}{
			{"qk_nope_head_dim", c.QKNopeDim, &a.QKNopeDim},
			{"qk_rope_head_dim", c.QKRopeDim, &a.QKRopeDim},
			{"v_head_dim", c.VHeadDim, &a.VHeadDim},
		} {
			if err := req(f.name, f.p, f.dst); err != nil {
				return nil, err
			}
		}
	} else if a.HeadDim <= 0 && c.HeadDim != nil {
		return nil, bad("head_dim", "a positive integer", "0")
	} else if a.HeadDim <= 0 {
		return nil, bad("head_dim", "a positive integer (hidden_size is not a multiple of num_attention_heads)", "nothing (field missing)")
	}

	// MoE.
	experts, expField := 0, ""
	for _, f := range []struct {
		name string
		p    *int
	}{{"num_local_experts", c.NumLocalExperts}, {"num_experts", c.NumExperts}, {"n_routed_experts", c.NRoutedExperts}} {
		if f.p != nil && *f.p != 0 {
			if *f.p < 0 || *f.p > maxDim {
				return nil, bad(f.name, fmt.Sprintf("an integer in 0..%d", maxDim), fmt.Sprint(*f.p))
			}
			experts, expField = *f.p, f.name
			break
		}
	}
	if experts > 0 {
		a.Experts = experts
		if err := req("num_experts_per_tok", c.ExpertsPerTok, &a.ExpertsPerTok); err != nil {
			return nil, err
		}
		if a.ExpertsPerTok > a.Experts {
			return nil, bad("num_experts_per_tok", fmt.Sprintf("at most %s (%d)", expField, a.Experts), fmt.Sprint(a.ExpertsPerTok))
		}
		a.ExpertIntermediate = a.Intermediate
		if c.IntermediateMLP != nil && c.Intermediate != nil {
			a.ExpertIntermediate = *c.Intermediate
		}
		if c.MoEIntermediate != nil {
			if err := req("moe_intermediate_size", c.MoEIntermediate, &a.ExpertIntermediate); err != nil {
				return nil, err
			}
		}
		switch {
		case c.NSharedExperts != nil:
			if *c.NSharedExperts < 0 || *c.NSharedExperts > 1024 {
				return nil, bad("n_shared_experts", "an integer in 0..1024", fmt.Sprint(*c.NSharedExperts))
			}
			a.SharedIntermediate = *c.NSharedExperts * a.ExpertIntermediate
		case c.SharedExpertInter != nil:
			if err := opt("shared_expert_intermediate_size", c.SharedExpertInter, 0, &a.SharedIntermediate); err != nil {
				return nil, err
			}
		case strings.HasPrefix(c.ModelType, "llama4"):
			// Llama 4 MoE layers always add one shared expert of the routed width.
			a.SharedIntermediate = a.ExpertIntermediate
		}
		moe, err := countMoELayers(path, &c, a.Layers)
		if err != nil {
			return nil, err
		}
		a.MoELayers = moe
	}

	if err := slidingLayers(path, &c, a); err != nil {
		return nil, err
	}

	// Dtypes: quantization_config wins over torch_dtype.
	act := c.TorchDtype
	if act == "" {
		act = c.Dtype
	}
	a.ActDtype = BF16
	if act != "" {
		d, err := ParseDtype(act)
		if err != nil {
			field := "torch_dtype"
			if c.TorchDtype == "" {
				field = "dtype"
			}
			return nil, bad(field, "bfloat16, float16 or float32", fmt.Sprintf("%q", act))
		}
		if d == FP32 {
			d = BF16 // fp32 checkpoints are served in bf16 by default
		}
		a.ActDtype = d
	}
	a.WeightDtype, a.KVDtype = a.ActDtype, a.ActDtype
	if q := bytes.TrimSpace(c.QuantizationConfig); len(q) > 0 && !bytes.Equal(q, []byte("null")) {
		qz, err := quantDtype(path, q)
		if err != nil {
			return nil, err
		}
		a.WeightDtype, a.MathDtype, a.AttnUnquantized = qz.weight, qz.math, qz.attnUnquantized
	}
	return a, nil
}

// slidingLayers reads which layers attend over a sliding window, the way
// HuggingFace transformers and vLLM read the config: layer_types when the
// config lists them ("sliding_attention" or "full_attention" per layer);
// else Qwen2/3's use_sliding_window and max_window_layers (the layers
// from that index on slide); else sliding_window_pattern N (Gemma 3,
// Cohere 2: every N-th layer is full, the others slide); else Gemma 2's and
// gpt-oss's alternation (even layers slide); else every layer (Mistral v0.1,
// Phi-3). sliding_window null or absent: every layer is full.
func slidingLayers(path string, c *hfConfig, a *Arch) error {
	bad := func(field, expected, found string) error {
		return &ConfigError{Path: path, Field: field, Expected: expected, Found: found}
	}
	L := a.Layers
	w := 0
	if c.SlidingWindow != nil {
		if *c.SlidingWindow <= 0 || *c.SlidingWindow > maxDim {
			return bad("sliding_window", fmt.Sprintf("a positive integer up to %d, or null", maxDim), fmt.Sprint(*c.SlidingWindow))
		}
		w = *c.SlidingWindow
	}
	if c.UseSlidingWindow != nil && !*c.UseSlidingWindow {
		w = 0 // Qwen: the window is listed but not used
	}
	n := 0
	switch {
	case len(c.LayerTypes) > 0:
		if len(c.LayerTypes) != L {
			return bad("layer_types", fmt.Sprintf("one entry per layer (num_hidden_layers %d)", L), fmt.Sprintf("%d entries", len(c.LayerTypes)))
		}
		for i, t := range c.LayerTypes {
			switch t {
			case "sliding_attention":
				n++
			case "full_attention":
			default:
				return bad(fmt.Sprintf("layer_types[%d]", i), `"sliding_attention" or "full_attention"`, fmt.Sprintf("%q", t))
			}
		}
		if n > 0 && w == 0 {
			return bad("sliding_window", fmt.Sprintf("a positive integer (layer_types lists %d sliding_attention layers)", n), "nothing (null, absent or use_sliding_window false)")
		}
	case w == 0:
	case c.UseSlidingWindow != nil || c.MaxWindowLayers != nil:
		k := 0
		if c.MaxWindowLayers != nil {
			if *c.MaxWindowLayers < 0 || *c.MaxWindowLayers > L {
				return bad("max_window_layers", fmt.Sprintf("0..%d (num_hidden_layers)", L), fmt.Sprint(*c.MaxWindowLayers))
			}
			k = *c.MaxWindowLayers
		}
		n = L - k
	case c.SlidingPattern != nil:
		p := *c.SlidingPattern
		if p <= 0 || p > maxDim {
			return bad("sliding_window_pattern", "a positive integer", fmt.Sprint(p))
		}
		n = L - L/p // layers p−1, 2p−1, … are full
	case c.ModelType == "gemma2" || c.ModelType == "gpt_oss":
		n = (L + 1) / 2
	default:
		n = L
	}
	if n == 0 {
		w = 0
	}
	a.Window, a.WindowLayers = w, n
	return nil
}

func countMoELayers(path string, c *hfConfig, layers int) (int, error) {
	step := func(field string, p *int) (int, error) {
		if p == nil {
			return 1, nil
		}
		if *p <= 0 {
			return 0, &ConfigError{path, field, "a positive integer", fmt.Sprint(*p)}
		}
		return *p, nil
	}
	n := 0
	switch {
	case c.FirstKDense != nil || c.MoELayerFreq != nil: // DeepSeek / GLM
		k := 0
		if c.FirstKDense != nil {
			if *c.FirstKDense < 0 || *c.FirstKDense > layers {
				return 0, &ConfigError{path, "first_k_dense_replace", fmt.Sprintf("0..%d", layers), fmt.Sprint(*c.FirstKDense)}
			}
			k = *c.FirstKDense
		}
		f, err := step("moe_layer_freq", c.MoELayerFreq)
		if err != nil {
			return 0, err
		}
		for i := k; i < layers; i++ {
			if i%f == 0 {
				n++
			}
		}
	case c.InterleaveMoEStep != nil: // Llama 4
		f, err := step("interleave_moe_layer_step", c.InterleaveMoEStep)
		if err != nil {
			return 0, err
		}
		for i := 0; i < layers; i++ {
			if (i+1)%f == 0 {
				n++
			}
		}
	default: // Qwen MoE decoder_sparse_step / mlp_only_layers; Mixtral: all layers
		f, err := step("decoder_sparse_step", c.DecoderSparseStep)
		if err != nil {
			return 0, err
		}
		dense := map[int]bool{}
		for _, l := range c.MLPOnlyLayers {
			if l < 0 || l >= layers {
				return 0, &ConfigError{path, "mlp_only_layers", fmt.Sprintf("layer indices 0..%d", layers-1), fmt.Sprint(l)}
			}
			dense[l] = true
		}
		for i := 0; i < layers; i++ {
			if !dense[i] && (i+1)%f == 0 {
				n++
			}
		}
	}
	return n, nil
}

func quantDtype(path string, raw []byte) (quantized, error) {
	var q quantConfig
	if err := json.Unmarshal(raw, &q); err != nil {
		return quantized{}, fmt.Errorf("%s: field quantization_config: %w", path, err)
	}
	bits := func(b int, float bool) (Dtype, bool) {
		switch {
		case b == 8 && float:
			return FP8, true
		case b == 8:
			return INT8, true
		case b == 4 && float:
			return FP4, true
		case b == 4:
			return INT4, true
		case b == 16:
			return BF16, true
		}
		return "", false
	}
	out := quantized{attnUnquantized: keepsAttention(q.ModulesToNotConvert, q.Ignore, q.ExcludeModules)}
	m := strings.ToLower(q.QuantMethod)
	switch m {
	case "fp8", "fbgemm_fp8":
		out.weight = FP8
		return out, nil
	case "mxfp4":
		// gpt-oss: vLLM's default MXFP4 MoE kernels take BF16 activations
		// (Triton or Marlin on Hopper; FlashInfer MXFP4×BF16 on SM100 unless
		// VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1): the math runs at BF16.
		out.weight, out.math = FP4, BF16
		return out, nil
	case "modelopt":
		switch strings.ToUpper(q.QuantAlgo) {
		case "FP8":
			out.weight = FP8
			return out, nil
		case "NVFP4":
			out.weight = FP4
			return out, nil
		}
		return quantized{}, &ConfigError{path, "quantization_config.quant_algo", "FP8 or NVFP4", fmt.Sprintf("%q", q.QuantAlgo)}
	case "gptq", "awq", "bitsandbytes":
		b := 4
		if q.Bits != nil {
			b = *q.Bits
		} else if q.WBit != nil {
			b = *q.WBit
		}
		if d, ok := bits(b, false); ok {
			out.weight, out.math = d, BF16 // weight-only
			return out, nil
		}
		return quantized{}, &ConfigError{path, "quantization_config.bits", "4 or 8", fmt.Sprint(b)}
	case "compressed-tensors":
		// Use the first group (sorted names) that quantises weights; groups agree in practice.
		names := make([]string, 0, len(q.ConfigGroups))
		for k := range q.ConfigGroups {
			names = append(names, k)
		}
		sortStrings(names)
		for _, k := range names {
			g := q.ConfigGroups[k]
			w := g.Weights
			if w == nil {
				continue
			}
			d, ok := bits(w.NumBits, w.Type == "float")
			if !ok {
				return quantized{}, &ConfigError{path, "quantization_config.config_groups." + k + ".weights.num_bits", "4, 8 or 16", fmt.Sprint(w.NumBits)}
			}
			out.weight, out.math = d, BF16 // weight-only unless activations are quantised too
			if in := g.InputActivation; in != nil {
				if a, ok := bits(in.NumBits, in.Type == "float"); ok && a != BF16 {
					out.math = a
				}
			}
			return out, nil
		}
		if strings.Contains(q.Format, "float") {
			out.weight = FP8
			return out, nil
		}
		return quantized{}, &ConfigError{path, "quantization_config.config_groups", "a group with weights", "none"}
	}
	return quantized{}, &ConfigError{path, "quantization_config.quant_method", "fp8, mxfp4, modelopt, gptq, awq, bitsandbytes or compressed-tensors", fmt.Sprintf("%q", q.QuantMethod)}
}

// keepsAttention reports whether a checkpoint's lists of unquantised
// modules name the language model's attention ("model.layers.*.self_attn",
// "…layers.0.self_attn.q_proj", "re:.*self_attn.*"); vision-tower entries do
// not count.
func keepsAttention(lists ...[]string) bool {
	for _, l := range lists {
		for _, m := range l {
			m = strings.ToLower(m)
			if strings.Contains(m, "vision") || strings.Contains(m, "visual") {
				continue
			}
			if strings.Contains(m, "self_attn") || strings.Contains(m, "attention") {
				return true
			}
		}
	}
	return false
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Parameter counts, in elements.

// AttnParams is the attention weight count of one layer.
func (a *Arch) AttnParams() float64 {
	h, nh := float64(a.Hidden), float64(a.Heads)
	if a.MLA() {
		qk := float64(a.QKNopeDim + a.QKRopeDim)
		var q float64
		if a.QLoraRank > 0 {
			q = h*float64(a.QLoraRank) + float64(a.QLoraRank)*nh*qk
		} else {
			q = h * nh * qk
		}
		kvA := h * float64(a.KVLoraRank+a.QKRopeDim)
		kvB := float64(a.KVLoraRank) * nh * float64(a.QKNopeDim+a.VHeadDim)
		o := nh * float64(a.VHeadDim) * h
		return q + kvA + kvB + o
	}
	hd := float64(a.HeadDim)
	return h*nh*hd*2 + 2*h*float64(a.KVHeads)*hd
}

// mlpParams is a gated (SwiGLU) MLP of width w: gate, up and down.
func (a *Arch) mlpParams(w int) float64 { return 3 * float64(a.Hidden) * float64(w) }

// ExpertParams is the weight count of one routed expert.
func (a *Arch) ExpertParams() float64 { return a.mlpParams(a.ExpertIntermediate) }

// RouterParams is the MoE router weight count of one MoE layer.
func (a *Arch) RouterParams() float64 { return float64(a.Hidden) * float64(a.Experts) }

// EmbedParams counts the input embedding plus the LM head (once if tied).
func (a *Arch) EmbedParams() float64 {
	e := float64(a.Vocab) * float64(a.Hidden)
	if a.TiedEmbed {
		return e
	}
	return 2 * e
}

// TotalParams is every weight, in elements.
func (a *Arch) TotalParams() float64 {
	layers := float64(a.Layers) * a.AttnParams()
	layers += float64(a.DenseLayers()) * a.mlpParams(a.Intermediate)
	moe := float64(a.Experts)*a.ExpertParams() + a.mlpParams(a.SharedIntermediate) + a.RouterParams()
	layers += float64(a.MoELayers) * moe
	return layers + a.EmbedParams()
}

// ActiveParams is the weights one token multiplies (top-k experts, no embedding lookup).
func (a *Arch) ActiveParams() float64 {
	layers := float64(a.Layers) * a.AttnParams()
	layers += float64(a.DenseLayers()) * a.mlpParams(a.Intermediate)
	moe := float64(a.ExpertsPerTok)*a.ExpertParams() + a.mlpParams(a.SharedIntermediate) + a.RouterParams()
	layers += float64(a.MoELayers) * moe
	return layers + float64(a.Vocab)*float64(a.Hidden)
}

// KVElemsPerTokenLayer is the KV cache elements one token stores in one layer
// across the whole model (all ranks). MLA stores the compressed latent plus
// the shared rope key.
func (a *Arch) KVElemsPerTokenLayer() float64 {
	if a.MLA() {
		return float64(a.KVLoraRank + a.QKRopeDim)
	}
	return 2 * float64(a.KVHeads) * float64(a.HeadDim)
}

// kvHeadsPerRank: GQA heads split across ranks, replicated when fewer than TP.
func (a *Arch) kvHeadsPerRank(tp int) float64 {
	return math.Ceil(float64(a.KVHeads) / float64(tp))
}

// KVBytesPerTokenRank is the KV bytes one token occupies on one TP rank (all layers).
func (a *Arch) KVBytesPerTokenRank(tp int) float64 {
	if tp < 1 {
		tp = 1
	}
	var perLayer float64
	if a.MLA() {
		perLayer = float64(a.KVLoraRank + a.QKRopeDim) // latent is replicated on every rank
	} else {
		perLayer = 2 * a.kvHeadsPerRank(tp) * float64(a.HeadDim)
	}
	return perLayer * float64(a.Layers) * a.KVDtype.Bytes()
}

// WeightBytesRank is the weight bytes held by one TP rank.
func (a *Arch) WeightBytesRank(tp int) float64 {
	if tp < 1 {
		tp = 1
	}
	act := a.ActDtype.Bytes()
	attn := float64(a.Layers) * a.AttnParams()
	router := float64(a.MoELayers) * a.RouterParams()
	quant := a.TotalParams() - attn - router - a.EmbedParams()
	return (quant*a.WeightDtype.Bytes() + attn*a.AttnDtype().Bytes() + (router+a.EmbedParams())*act) / float64(tp)
}

// Validate checks an Arch built or modified in code (dtype overrides).
func (a *Arch) Validate() error {
	for _, d := range []struct {
		f string
		v Dtype
	}{{"weight dtype", a.WeightDtype}, {"kv dtype", a.KVDtype}, {"activation dtype", a.ActDtype}, {"math dtype", a.Math()}} {
		if d.v.Bytes() == 0 {
			return fmt.Errorf("%s: %s: unknown %q", a.Name, d.f, d.v)
		}
	}
	return nil
}
