package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/roofline"
)

// writeSteps judges step times on Splitwise's static-batch Llama2-70B
// prefill and decode iterations, and the roofline's dense layer on Vidur's
// MLP-layer profiles.
func writeSteps(w *strings.Builder, data string, modes []string) error {
	path := filepath.Join(data, "measurements/splitwise/perf_model.csv")
	sha := sha256File(path)
	fmt.Fprintln(w, "#### Step level (Splitwise perf_model.csv: Llama2-70B fp16, static batches, 2023 software stack)")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| GPU | TP | steps |")
	for _, m := range modes {
		fmt.Fprintf(w, " %s prefill | %s decode |", m, m)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---:|---:|")
	for range modes {
		fmt.Fprint(w, "---:|---:|")
	}
	fmt.Fprintln(w)
	for _, hw := range []string{"a100-80gb", "h100-80gb"} {
		for _, tp := range []int{2, 4, 8} {
			f, err := openData(path)
			if err != nil {
				return err
			}
			ss, _, err := measure.ReadStepTimes(path, f, measure.StepFilter{Model: "llama2-70b", GPU: hw, TP: tp})
			f.Close()
			if err != nil {
				return err
			}
			gpu := strings.TrimSuffix(hw, "-80gb")
			if gpu == "a100" {
				gpu = "a100-80gb"
			}
			fmt.Fprintf(w, "| %s | %d | %d |", gpu, tp, len(ss))
			for _, mode := range modes {
				// auto: the Splitwise fits of these very steps (another
				// stack's, so blis-sim's auto would not pick them).
				res, err := resolveFor(mode, fit.Deployment{Model: "llama-2-70b", GPU: gpu, TP: tp, Engine: "splitwise"})
				if err != nil {
					fmt.Fprint(w, " error | error |")
					continue
				}
				// Splitwise's 2023 stack schedules synchronously: the
				// engine's CPU work adds to each step.
				step := latency.WithHost(res.Model, false)
				var pre, dec []pair
				for i := range ss {
					p := pair{float64(step.StepTime(&ss[i].Batch)), ss[i].US}
					if strings.HasSuffix(ss[i].Source, "prefill") {
						pre = append(pre, p)
					} else {
						dec = append(dec, p)
					}
				}
				a, b := errStats(pre)
				c, d := errStats(dec)
				tag := ""
				if inSample(res, sha) {
					tag = " (fitted on these rows)"
				}
				fmt.Fprintf(w, " %s | %s%s |", errCell(a, b), errCell(c, d), tag)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "#### Layer level (Vidur MLP-layer profiles: one dense layer without attention, token counts 1–4096, roofline)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| GPU | model | rows (all TP) | error | error ≤ 64 tokens | error ≥ 1024 tokens |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	sets := []struct{ gpu, dir, model string }{
		{"a100-80gb", "a100/meta-llama/Llama-2-7b-hf", "llama-2-7b"},
		{"a100-80gb", "a100/meta-llama/Meta-Llama-3-8B", "llama-3.1-8b"},
		{"h100", "h100/meta-llama/Llama-2-7b-hf", "llama-2-7b"},
		{"h100", "h100/codellama/CodeLlama-34b-Instruct-hf", "codellama-34b"},
		{"h100", "h100/meta-llama/Llama-2-70b-hf", "llama-2-70b"},
	}
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
		var all, small, large []pair
		for _, r := range rows {
			rf, err := roofline.New(arch, g, r.TP)
			if err != nil {
				return err
			}
			gu, eu := rf.DenseLayerUS(float64(r.Tokens))
			p := pair{gu + eu, r.US}
			all = append(all, p)
			if r.Tokens <= 64 {
				small = append(small, p)
			}
			if r.Tokens >= 1024 {
				large = append(large, p)
			}
		}
		a, b := errStats(all)
		c, d := errStats(small)
		e, f := errStats(large)
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s |\n", s.gpu, s.model, len(all), errCell(a, b), errCell(c, d), errCell(e, f))
	}
	fmt.Fprintln(w)
	return nil
}
