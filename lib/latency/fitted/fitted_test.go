package fitted

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

func TestHistoricalCSVReproducesLinear(t *testing.T) {
	f, err := os.Open("testdata/blackbox_coefficients_historical.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cs, err := ReadHistoricalCSV("testdata/blackbox_coefficients_historical.csv", f)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 111 {
		t.Fatalf("rows = %d, want 111", len(cs))
	}
	// Row 2 of the file, by hand: granite-3.1-8b A100-80 tp1 v0.8.4.
	c := cs[0]
	if c.Model != "ibm-granite/granite-3.1-8b-instruct" || c.GPU != "A100-80" || c.TP != 1 || c.Version != "0.8.4" || c.Engine != "vllm" {
		t.Errorf("first row identity: %+v", c)
	}
	m, err := NewModel(c, nil, "csv")
	if err != nil {
		t.Fatal(err)
	}
	b := &latency.Batch{PrefillSeqs: 1, PrefillTokens: 512, DecodeSeqs: 30, DecodeCtx: 9000}
	// 4599.735684704053 + 115.734784868264·512 + 6.180744132016841·30 = 64041.33
	if got := m.StepTime(b); got != 64041 {
		t.Errorf("StepTime = %d, want 64041", got)
	}
	if m.Alpha().QueueBase != 5948.910386094121 || m.Alpha().PerOutputToken != 16738.26113236831 {
		t.Errorf("alpha = %+v", m.Alpha())
	}
	// Every row: fitted model == latency.Linear on a spread of batches.
	for _, c := range cs {
		lin, ok := c.Linear()
		if !ok {
			t.Fatalf("%s: not linear", c.Model)
		}
		fm, err := NewModel(c, nil, "x")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []latency.Batch{{DecodeSeqs: 1, DecodeCtx: 10}, {PrefillSeqs: 2, PrefillTokens: 4096}, {PrefillSeqs: 1, PrefillTokens: 100, DecodeSeqs: 200}} {
			if a, l := fm.StepTime(&b), lin.StepTime(&b); a != l {
				t.Errorf("%s %s tp%d: fitted %d != linear %d", c.Model, c.GPU, c.TP, a, l)
			}
		}
	}
}

func TestHistoricalCSVErrors(t *testing.T) {
	head := "model,gpu,tp,vllm_version,alpha0,alpha1,alpha2,beta0,beta1,beta2,best_loss,note\n"
	for _, c := range []struct{ doc, want string }{
		{"model,gpu\n", `expected column "tp"`},
		{head + "m,H100,x,v1,1,1,1,1,1,1,0,\n", "line 2: field tp: expected a positive integer, found \"x\""},
		{head + "m,H100,1,v1,1,1,1,abc,1,1,0,\n", "line 2: field beta0: expected a number, found \"abc\""},
		{head + "m,H100,1,v1,1,1,1,-1,1,1,0,\n", "terms[0].value: expected a finite non-negative number, found -1"},
	} {
		_, err := ReadHistoricalCSV("h.csv", strings.NewReader(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error = %v, want %q", err, c.want)
		}
	}
}

func sample() *Coefficients {
	return &Coefficients{
		Model: "llama-3.1-8b", GPU: "h100", TP: 1, Engine: "vllm", Version: "0.8.4", WeightDtype: "bf16",
		Terms:   []Term{{Const, 5000}, {PrefillTokens, 4.5}, {DecodeTokens, 0.5}, {Roof, 1.1}},
		Alpha:   latency.Alpha{QueueBase: 2000, QueuePerInputToken: 4, PerOutputToken: 100},
		Sources: []Source{{Path: "x.csv", SHA256: strings.Repeat("ab", 32), Rows: 10}},
		Fit:     FitInfo{Method: "nnls", Target: "step_us", TrainRows: 8, TestRows: 2, TrainMAPE: 5, TestMAPE: 6.1},
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	c := sample()
	if got := c.FileName(); got != "llama-3.1-8b/h100-tp1-vllm-0.8.4.yaml" {
		t.Errorf("FileName = %q", got)
	}
	p := filepath.Join(t.TempDir(), c.FileName())
	if err := c.Save(p); err != nil {
		t.Fatal(err)
	}
	back, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.Marshal()
	b, _ := back.Marshal()
	if string(a) != string(b) {
		t.Errorf("round trip differs:\n%s\n%s", a, b)
	}
}

func TestParseErrors(t *testing.T) {
	good, _ := sample().Marshal()
	for _, c := range []struct{ doc, want string }{
		// Keys are named in the user's words, never as Go types (fitted.Coefficients).
		{string(good) + "extra: 1\n", "c.yaml:31: extra: unknown key (expected one of model, gpu, tp, engine, version, weight_dtype, kv_dtype, terms, roofline_efficiency, alpha, sources, fit, notes)"},
		{strings.Replace(string(good), "model:", "modle:", 1), "c.yaml:1: modle: unknown key; did you mean model?"},
		{strings.Replace(string(good), "tp: 1", "tp: one", 1), `c.yaml:3: tp: expected an integer, found "one"`},
		{strings.Replace(string(good), "tp: 1", "tp: 0", 1), "field tp: expected a positive integer, found 0"},
		{strings.Replace(string(good), "feature: const", "feature: konst", 1), `feature "konst": unknown`},
		{strings.Replace(string(good), "value: 5000", "value: -5", 1), "field terms[0].value: expected a finite non-negative number, found -5"},
		{strings.Replace(string(good), "weight_dtype: bf16", "weight_dtype: fp7", 1), "field weight_dtype"},
		{"", "c.yaml: empty file, expected a coefficients YAML document"},
		{strings.Replace(string(good), "value: 5000", "value: 1e300", 1), "field terms[0].value: expected at most 1e+12, found 1e+300"},
	} {
		_, err := Parse("c.yaml", []byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error = %v, want %q", err, c.want)
		}
	}
}

func TestFeaturesMatchRoofline(t *testing.T) {
	a, err := roofline.LoadModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := roofline.LookupGPU("h100")
	rf, err := roofline.New(a, g, 2)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{Const, PrefillTokens, DecodeTokens, BatchSize, PrefillSeqs, PrefillAttn, PrefillCtx, DecodeCtx, Layers, RoofCompute, RoofMemory, RoofComm, Roof}
	ev, err := NewEvaluator(names, rf)
	if err != nil {
		t.Fatal(err)
	}
	b := &latency.Batch{PrefillSeqs: 2, PrefillTokens: 300, PrefillCtx: 50, PrefillAttn: 30000, DecodeSeqs: 7, DecodeCtx: 7000}
	got := ev.Features(b, nil)
	tr := rf.Terms(b)
	want := []float64{1, 300, 7, 9, 2, 30000, 50, 7000, 32, tr.ComputeUS, tr.MemoryUS, tr.CommUS, tr.TotalUS}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("%s = %v, want %v", names[i], got[i], want[i])
		}
	}
	if _, err := NewEvaluator([]string{Roof}, nil); err == nil {
		t.Error("roofline feature without roofline: want error")
	}
	if _, err := NewEvaluator([]string{Const, Const}, nil); err == nil {
		t.Error("duplicate feature: want error")
	}
	// Features must not allocate when given a buffer (hot loop).
	buf := make([]float64, len(names))
	if n := testing.AllocsPerRun(100, func() { ev.Features(b, buf) }); n != 0 {
		t.Errorf("Features allocates %v times per call", n)
	}
}

func TestFind(t *testing.T) {
	mk := func(version, dtype string) []byte {
		c := sample()
		c.Version, c.WeightDtype = version, dtype
		data, _ := c.Marshal()
		return data
	}
	fsys := fstest.MapFS{
		"llama-3.1-8b/h100-tp1-vllm-0.8.4.yaml":  {Data: mk("0.8.4", "bf16")},
		"llama-3.1-8b/h100-tp1-vllm-0.10.1.yaml": {Data: mk("0.10.1", "bf16")},
		"llama-3.1-8b/h100-tp1-sglang-0.5.yaml":  {Data: mk("0.5", "fp8")},
		"llama-3.1-8b/h100-tp2-vllm-0.8.4.yaml":  {Data: mk("0.8.4", "bf16")},
	}
	cases := []struct {
		q    Query
		want string
	}{
		{Query{Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100", TP: 1, WeightDtype: "bf16"}, "llama-3.1-8b/h100-tp1-vllm-0.10.1.yaml"},
		{Query{Model: "llama-3.1-8b", GPU: "h100", TP: 1, Engine: "vllm", Version: "0.8.4"}, "llama-3.1-8b/h100-tp1-vllm-0.8.4.yaml"},
		{Query{Model: "llama-3.1-8b", GPU: "h100", TP: 1, WeightDtype: "fp8"}, "llama-3.1-8b/h100-tp1-sglang-0.5.yaml"},
		{Query{Model: "llama-3.1-8b", GPU: "h100", TP: 4}, ""},
		{Query{Model: "qwen3-14b", GPU: "h100", TP: 1}, ""},
		{Query{Model: "llama-3.1-8b", GPU: "a100", TP: 1}, ""},
	}
	for _, c := range cases {
		p, _, err := Find(fsys, c.q)
		if err != nil || p != c.want {
			t.Errorf("Find(%+v) = %q, %v; want %q", c.q, p, err, c.want)
		}
	}
}

func TestRecordedRooflineEfficiency(t *testing.T) {
	a, err := roofline.LoadModel("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := roofline.LookupGPU("h100")
	rf, err := roofline.New(a, g, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := &Coefficients{Model: "llama-3.1-8b", GPU: "h100", TP: 1, Terms: []Term{{Roof, 1}}}
	b := &latency.Batch{DecodeSeqs: 16, DecodeCtx: 16000}
	m1, err := NewModel(c, rf, "now")
	if err != nil {
		t.Fatal(err)
	}
	// A file fitted when memory efficiency was half as good predicts slower steps.
	old := g.Eff
	old.Memory /= 2
	c.RooflineEfficiency = &old
	m2, err := NewModel(c, rf, "recorded")
	if err != nil {
		t.Fatal(err)
	}
	if m2.StepTime(b) <= m1.StepTime(b) {
		t.Errorf("recorded profile ignored: %d vs %d", m2.StepTime(b), m1.StepTime(b))
	}
	data, _ := c.Marshal()
	back, err := Parse("c.yaml", data)
	if err != nil || back.RooflineEfficiency == nil || *back.RooflineEfficiency != old {
		t.Errorf("round trip of roofline_efficiency: %v %v", back, err)
	}
}
