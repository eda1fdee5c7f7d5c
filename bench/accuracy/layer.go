package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"

	"github.com/blis-sim/blis/lib/measure"
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
	fmt.Fprintln(w, "### Layer level (Vidur per-operation profiles: one dense layer without attention, all token counts 1–4096)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| GPU | model | TP | rows | MdAPE | bias | MdAPE ≤ 64 tokens | MdAPE ≥ 1024 tokens |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|")
	for _, s := range sets {
		rows, _, err := measure.ReadVidurMLPFile(filepath.Join(data, "measurements/vidur/profiling/compute", s.dir, "mlp.csv"))
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
		for _, r := range rows {
			tp, T, meas := r.TP, float64(r.Tokens), r.US
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
