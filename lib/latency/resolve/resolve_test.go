package resolve

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/fitted"
	"github.com/blis-sim/blis/lib/roofline"
)

func coeffs(model, gpu string, tp int, dtype string, test float64) []byte {
	c := &fitted.Coefficients{Model: model, GPU: gpu, TP: tp, Engine: "vllm", Version: "0.8.4", WeightDtype: dtype,
		Terms: []fitted.Term{{Feature: fitted.Const, Value: 1000}, {Feature: fitted.DecodeTokens, Value: 10}, {Feature: fitted.Roof, Value: 1}},
		Fit:   fitted.FitInfo{Method: "nnls", TrainRows: 10, TestRows: 5, TestMAPE: test}}
	data, err := c.Marshal()
	if err != nil {
		panic(err)
	}
	return data
}

func withFS(t *testing.T, m fstest.MapFS) {
	old := coefficientsDirs
	coefficientsDirs = func() []searchDir { return []searchDir{{m, "coefficients", true}} }
	t.Cleanup(func() { coefficientsDirs = old })
}

func TestSelection(t *testing.T) {
	withFS(t, fstest.MapFS{"llama-3.1-8b/h100-tp1-vllm-0.8.4.yaml": {Data: coeffs("llama-3.1-8b", "h100", 1, "bf16", 6.1)}})
	cases := []struct {
		spec    Spec
		why     string // prefix of Why, or error substring when errWant
		errWant bool
		fitted  bool
	}{
		{Spec{Model: "llama-3.1-8b", GPU: "h100", TP: 1}, "latency: fitted coefficients coefficients/llama-3.1-8b/h100-tp1-vllm-0.8.4.yaml (test MAPE 6.1%)", false, true},
		{Spec{Mode: "auto", Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100"}, "latency: fitted coefficients", false, true},
		{Spec{Mode: "roofline", Model: "llama-3.1-8b", GPU: "h100", TP: 1}, "latency: roofline for llama-3.1-8b on h100 tp1 (--latency roofline)", false, false},
		{Spec{Model: "llama-3.1-8b", GPU: "h100", TP: 2}, "latency: roofline (no coefficients for llama-3.1-8b on h100 tp2)", false, false},
		{Spec{Model: "llama-3.1-8b", GPU: "h100", TP: 1, WeightDtype: "fp8"}, "latency: roofline (no coefficients for llama-3.1-8b on h100 tp1 fp8; coefficients/llama-3.1-8b/h100-tp1-vllm-0.8.4.yaml is for weight dtype bf16)", false, false},
		{Spec{Mode: "fitted", Model: "qwen3-14b", GPU: "h100", TP: 1}, "--latency fitted: no coefficients for qwen3-14b on h100 tp1", true, false},
		{Spec{Mode: "fast", Model: "qwen3-14b", GPU: "h100"}, `--latency: expected auto, roofline or fitted, found "fast"`, true, false},
		{Spec{Model: "qwen3-14b", GPU: "tpu"}, `--gpu: gpu "tpu": not built in`, true, false},
		{Spec{Model: "no-such-model", GPU: "h100"}, `--model: model "no-such-model": not in the catalogue`, true, false},
		{Spec{GPU: "h100"}, "--model: expected a catalogue name", true, false},
		{Spec{Model: "qwen3-14b", GPU: "h100", TP: 3}, "--tp: ", true, false},
		{Spec{Model: "qwen3-14b", GPU: "h100", WeightDtype: "fp7"}, "--weight-dtype: unknown dtype", true, false},
	}
	for _, c := range cases {
		r, err := Resolve(c.spec)
		if c.errWant {
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%+v: error = %v, want %q", c.spec, err, c.why)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", c.spec, err)
			continue
		}
		if !strings.HasPrefix(r.Why, c.why) || strings.Contains(r.Why, "\n") {
			t.Errorf("%+v: Why = %q, want prefix %q", c.spec, r.Why, c.why)
		}
		if _, isFitted := r.Model.(*fitted.Model); isFitted != c.fitted {
			t.Errorf("%+v: model %s, fitted want %v", c.spec, r.Model.Name(), c.fitted)
		}
		// Every choice says how wrong it was on real runs (issue 16 item 5).
		kind := map[bool]string{true: "fitted", false: "roofline"}[c.fitted]
		if want := "; " + latency.DescribeKnownError(kind, "Hopper"); !strings.HasSuffix(r.Why, want) {
			t.Errorf("%+v: Why = %q, want suffix %q", c.spec, r.Why, want)
		}
		if n, err := r.KVCapacityTokens(0.9, roofline.EngineLimits{MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192}); err != nil || n <= 0 {
			t.Errorf("%+v: KV capacity %d, %v", c.spec, n, err)
		}
	}
}

func TestExplicitFile(t *testing.T) {
	withFS(t, fstest.MapFS{})
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, coeffs("llama-3.1-8b", "h100", 1, "", 4), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(Spec{CoefficientsFile: p})
	if err != nil {
		t.Fatal(err)
	}
	if r.Why != "latency: fitted coefficients "+p+" (test MAPE 4.0%)" {
		t.Errorf("Why = %q", r.Why)
	}
	// const 1000 + 10/decode + roofline µs
	b := &latency.Batch{DecodeSeqs: 4, DecodeCtx: 400}
	want := int64(1040 + r.Roofline.Terms(b).TotalUS + 0.5)
	if got := r.Model.StepTime(b); got != want {
		t.Errorf("StepTime = %d, want %d", got, want)
	}
	if _, err := Resolve(Spec{CoefficientsFile: p, TP: 2}); err == nil || !strings.Contains(err.Error(), "coefficients are for tp 1") {
		t.Errorf("tp mismatch error = %v", err)
	}
	if _, err := Resolve(Spec{Mode: "roofline", CoefficientsFile: p}); err == nil {
		t.Error("roofline + coefficients: want error")
	}
}

// Coefficients fitted for one model or GPU must not silently time another.
func TestExplicitFileMismatch(t *testing.T) {
	withFS(t, fstest.MapFS{})
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, coeffs("llama-3.1-8b", "rtx4090", 1, "", 4), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		spec Spec
		want string // "" = no error
	}{
		{"same", Spec{CoefficientsFile: p, Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "RTX4090"}, ""},
		{"other gpu", Spec{CoefficientsFile: p, Model: "llama-3.1-8b", GPU: "h100"}, p + ": field gpu: coefficients are for rtx4090, deployment is on h100"},
		{"other model", Spec{CoefficientsFile: p, Model: "qwen3-32b", GPU: "rtx4090", TP: 1}, p + ": field model: coefficients are for llama-3.1-8b, deployment runs qwen3-32b"},
	} {
		_, err := Resolve(c.spec)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestEnvDir(t *testing.T) {
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "qwen3-14b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "qwen3-14b", "h100-tp1-vllm-0.8.4.yaml"), coeffs("qwen3-14b", "h100", 1, "", 3), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, d)
	r, err := Resolve(Spec{Model: "qwen3-14b", GPU: "h100", TP: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Why, "latency: fitted coefficients "+d+"/qwen3-14b/h100-tp1-vllm-0.8.4.yaml") {
		t.Errorf("Why = %q", r.Why)
	}
}

func TestDtypeOverrides(t *testing.T) {
	withFS(t, fstest.MapFS{})
	base, err := Resolve(Spec{Mode: "roofline", Model: "llama-3.1-70b", GPU: "h100", TP: 4})
	if err != nil {
		t.Fatal(err)
	}
	fp8, err := Resolve(Spec{Mode: "roofline", Model: "llama-3.1-70b", GPU: "h100", TP: 4, WeightDtype: "fp8", KVDtype: "fp8"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fp8.Roofline.KVBytesPerToken(), base.Roofline.KVBytesPerToken()/2; got != want {
		t.Errorf("fp8 KV bytes/token = %v, want %v", got, want)
	}
	// The embedding and LM head stay BF16 (vLLM quantises neither): only
	// the rest halves.
	a := base.Roofline.A
	emb := a.EmbedParams() * 2 / 4
	if got, want := fp8.Roofline.WeightBytesPerRank(), (base.Roofline.WeightBytesPerRank()-emb)/2+emb; math.Abs(got-want) > 1 {
		t.Errorf("fp8 weight bytes = %v, want %v", got, want)
	}
	kb, _ := base.KVCapacityTokens(0.9, roofline.EngineLimits{MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192})
	kf, _ := fp8.KVCapacityTokens(0.9, roofline.EngineLimits{MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192})
	if kf <= 2*kb {
		t.Errorf("fp8 weights and KV should more than double KV tokens: %d vs %d", kf, kb)
	}
	b := &latency.Batch{DecodeSeqs: 8, DecodeCtx: 8000}
	if fp8.Model.StepTime(b) >= base.Model.StepTime(b) {
		t.Error("fp8 decode should be faster than bf16 (half the weight bytes)")
	}
}

func TestTPErrors(t *testing.T) {
	withFS(t, fstest.MapFS{})
	for _, c := range []struct {
		tp   int
		want string
	}{
		{3, "--tp: llama-3.1-8b has 32 attention heads, not divisible by tp 3"},
		{-1, "--tp: expected a positive integer, found -1"},
	} {
		_, err := Resolve(Spec{Mode: "roofline", Model: "llama-3.1-8b", GPU: "h100", TP: c.tp})
		if err == nil || err.Error() != c.want {
			t.Errorf("tp %d: error = %v, want %q", c.tp, err, c.want)
		}
	}
}

// A fit in the user's directory wins over the shipped file for the same
// deployment, and says which shipped file it shadows; BLIS_COEFFICIENTS
// replaces both.
func TestUserDirShadowsShipped(t *testing.T) {
	shipped := fstest.MapFS{"qwen3-14b/h100-tp1-vllm-0.8.4.yaml": {Data: coeffs("qwen3-14b", "h100", 1, "", 6.1)},
		"qwen3-14b/h100-tp2-vllm-0.8.4.yaml": {Data: coeffs("qwen3-14b", "h100", 2, "", 7.5)}}
	user := t.TempDir()
	if err := os.MkdirAll(filepath.Join(user, "qwen3-14b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(user, "qwen3-14b", "h100-tp1-vllm-0.8.4.yaml"), coeffs("qwen3-14b", "h100", 1, "", 31.2), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(UserEnvDir, user)
	t.Setenv(EnvDir, "")
	old := coefficientsDirs
	coefficientsDirs = func() []searchDir {
		dirs := old()
		dirs[len(dirs)-1] = searchDir{shipped, "coefficients", true} // the embedded files, replaced
		return dirs
	}
	t.Cleanup(func() { coefficientsDirs = old })
	r, err := Resolve(Spec{Model: "qwen3-14b", GPU: "h100", TP: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := "latency: fitted coefficients " + user + "/qwen3-14b/h100-tp1-vllm-0.8.4.yaml (test MAPE 31.2%; shadows the shipped coefficients/qwen3-14b/h100-tp1-vllm-0.8.4.yaml, test MAPE 6.1%)"
	if r.Why != want {
		t.Errorf("Why = %q\nwant  %q", r.Why, want)
	}
	// No user file for tp2: the shipped one, without a note.
	r, err = Resolve(Spec{Model: "qwen3-14b", GPU: "h100", TP: 2})
	if err != nil || r.Why != "latency: fitted coefficients coefficients/qwen3-14b/h100-tp2-vllm-0.8.4.yaml (test MAPE 7.5%); "+latency.DescribeKnownError("fitted", "Hopper") {
		t.Errorf("tp2: %v, %v", r, err)
	}
	_, err = Resolve(Spec{Mode: "fitted", Model: "qwen3-14b", GPU: "h100", TP: 4})
	if err == nil || !strings.Contains(err.Error(), user+"/qwen3-14b/ or coefficients/qwen3-14b/") {
		t.Errorf("fitted, none: %v", err)
	}
}

// auto times vLLM: a shipped fit of another stack's steps (Splitwise's
// static batches) is not a candidate, and the stderr line says it exists.
func TestAutoSkipsOtherEngines(t *testing.T) {
	t.Setenv("BLIS_COEFFICIENTS", "")
	t.Setenv("BLIS_USER_COEFFICIENTS", t.TempDir())
	r, err := Resolve(Spec{Mode: Auto, Model: "llama-2-70b", GPU: "h100", TP: 4})
	if err != nil {
		t.Fatal(err)
	}
	if r.Coeffs != nil || !strings.Contains(r.Why, "h100-tp4-splitwise-8f99e7dc.yaml is a fit of engine splitwise, not vLLM's (pass --coefficients to use it)") {
		t.Fatalf("coeffs %v; why %s", r.Coeffs != nil, r.Why)
	}
	r, err = Resolve(Spec{Mode: Auto, Model: "llama-2-70b", GPU: "h100", TP: 4, Engine: "splitwise"})
	if err != nil || r.Coeffs == nil {
		t.Fatalf("asked for the splitwise fit: %v, %v", r, err)
	}
}
