package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"

	"github.com/blis-sim/blis/lib/roofline"
)

// layerLevel compares one dense layer's non-attention time (projections,
// MLP, norms, rope, activation, residual add) with Vidur's per-operation
// profiles (medians, ms) for every token count and TP degree.
func layerLevel(data string, w io.Writer) error {
	sets := []struct{ gpu, dir, model string }{
		{"h100", "h100/meta-llama/Llama-2-7b-hf", "llama-2-7b"},
		{"h100", "h100/meta-llama/Llama-2-70b-hf", "llama-2-70b"},
		{"h100", "h100/codellama/CodeLlama-34b-Instruct-hf", "codellama-34b"},
		{"a100-80gb", "a100/meta-llama/Llama-2-7b-hf", "llama-2-7b"},
		{"a100-80gb", "a100/meta-llama/Meta-Llama-3-8B", "llama-3.1-8b"},
	}
	ops := []string{"input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add"}
	fmt.Fprintln(w, "### Layer level (Vidur per-operation profiles: one dense layer without attention, all token counts 1–4096)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| GPU | model | TP | rows | MdAPE | bias | MdAPE ≤ 64 tokens | MdAPE ≥ 1024 tokens |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|")
	for _, s := range sets {
		t, err := readCSV(filepath.Join(data, "measurements/vidur/profiling/compute", s.dir, "mlp.csv"))
		if err != nil {
			return err
		}
		arch, err := roofline.LoadModel(s.model)
		if err != nil {
			return err
		}
		g, _ := roofline.LookupGPU(s.gpu)
		type acc struct{ all, small, large, bias []float64 }
		res := map[int]*acc{}
		for _, r := range t.rows {
			tp := int(t.f(r, "num_tensor_parallel_workers"))
			T := t.f(r, "num_tokens")
			var meas float64
			for _, op := range ops {
				meas += t.f(r, "time_stats."+op+".median") * 1000
			}
			if math.IsNaN(meas) || meas <= 0 {
				continue
			}
			rf, err := roofline.New(arch, g, tp)
			if err != nil {
				return err
			}
			gu, eu := rf.DenseLayerUS(T)
			p := gu + eu
			if res[tp] == nil {
				res[tp] = &acc{}
			}
			a := res[tp]
			e := math.Abs(p-meas) / meas * 100
			a.all = append(a.all, e)
			a.bias = append(a.bias, math.Log(p/meas))
			if T <= 64 {
				a.small = append(a.small, e)
			}
			if T >= 1024 {
				a.large = append(a.large, e)
			}
		}
		tps := make([]int, 0, len(res))
		for tp := range res {
			tps = append(tps, tp)
		}
		sort.Ints(tps)
		for _, tp := range tps {
			a := res[tp]
			fmt.Fprintf(w, "| %s | %s | %d | %d | %.1f%% | %+.1f%% | %.1f%% | %.1f%% |\n", s.gpu, s.model, tp, len(a.all), median(a.all),
				(math.Exp(median(a.bias))-1)*100, median(a.small), median(a.large))
		}
	}
	fmt.Fprintln(w)
	return nil
}
