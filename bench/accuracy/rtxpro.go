package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"github.com/blis-sim/blis/lib/roofline"
)

// profilerGEMMs are the weight GEMMs of the LLMServingSim per-layer
// profiles on the RTX PRO 6000 (vLLM 0.19, bf16, eager), per rank: the
// layer name in dense.csv and its n × k.
var profilerGEMMs = []struct {
	dir   string
	gemms map[string][2]float64
}{
	{"meta-llama/Llama-3.1-8B/bf16/tp1", map[string][2]float64{
		"qkv_proj": {6144, 4096}, "o_proj": {4096, 4096}, "gate_up_proj": {28672, 4096}, "down_proj": {4096, 14336}}},
	// Qwen3-32B at TP2: 32 query + 4 KV heads of 128 per rank, I = 25600.
	{"Qwen/Qwen3-32B/bf16/tp2", map[string][2]float64{
		"qkv_proj": {5120, 5120}, "o_proj": {5120, 4096}, "gate_up_proj": {25600, 5120}, "down_proj": {5120, 12800}}},
}

// loadProfilerGEMMs reads the GEMM rows of the RTX PRO 6000 profiles.
func loadProfilerGEMMs(data string) ([]sample, error) {
	var out []sample
	for _, p := range profilerGEMMs {
		t, err := readCSV(filepath.Join(data, "measurements/llmservingsim/profiler/perf/RTXPRO6000", p.dir, "dense.csv"))
		if err != nil {
			return nil, err
		}
		for _, r := range t.rows {
			nk, ok := p.gemms[r[t.col["layer"]]]
			if !ok {
				continue
			}
			s := sample{a: t.f(r, "tokens"), b: nk[0], c: nk[1], meas: t.f(r, "time_us")}
			if !(s.meas > 0) {
				continue
			}
			s.train = !heldOut(p.dir + "/" + r[t.col["layer"]] + "/" + strconv.Itoa(int(s.a)))
			out = append(out, s)
		}
	}
	return out, nil
}

// rtxProLevel judges the GEMM cost on the RTX PRO 6000 profiles; with
// calibrate it grid-searches GEMM and memory efficiency and the kernel
// floor on the training rows, as for the aiconfigurator GEMM tables.
func rtxProLevel(data string, calibrate bool, w io.Writer) error {
	ss, err := loadProfilerGEMMs(data)
	if err != nil {
		return err
	}
	g, _ := roofline.LookupGPU("rtxpro6000")
	if calibrate {
		c := g
		e := calibrateGEMM(&c, ss)
		fmt.Fprintf(w, "calibrated rtxpro6000 (LLMServingSim profiles): GEMM: %.2f, Memory: %.2f, KernelUS: %.1f\n\n", e.GEMM, e.Memory, e.KernelUS)
	}
	fmt.Fprintln(w, "### GEMMs on the RTX PRO 6000 (LLMServingSim per-layer profiles, vLLM 0.19: Llama-3.1-8B TP1, Qwen3-32B TP2, 1–2048 tokens)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| rows held-out | MdAPE held-out | MdAPE all | median bias | MdAPE ≤ 64 tokens | MdAPE ≥ 1024 tokens |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
	mh, nh, _ := mdape(&g, kGEMM, ss, 1)
	ma, _, bias := mdape(&g, kGEMM, ss, 2)
	var small, large []sample
	for _, s := range ss {
		if s.a <= 64 {
			small = append(small, s)
		}
		if s.a >= 1024 {
			large = append(large, s)
		}
	}
	msm, _, _ := mdape(&g, kGEMM, small, 2)
	mlg, _, _ := mdape(&g, kGEMM, large, 2)
	fmt.Fprintf(w, "| %d | %.1f%% | %.1f%% | %+.1f%% | %.1f%% | %.1f%% |\n\n", nh, mh, ma, bias, msm, mlg)
	return nil
}

// calibrateGEMM is calibrateGPU's GEMM search alone.
func calibrateGEMM(g *roofline.GPU, ss []sample) roofline.Efficiency {
	best := math.Inf(1)
	e := g.Eff
	for ge := 0.40; ge <= 1.0001; ge += 0.01 {
		for me := 0.50; me <= 1.0001; me += 0.01 {
			for f := 0.0; f <= 12.0001; f += 0.5 {
				g.Eff.GEMM, g.Eff.Memory, g.Eff.KernelUS = ge, me, f
				if l := loss(g, kGEMM, ss); l < best {
					best, e.GEMM, e.Memory, e.KernelUS = l, math.Round(ge*100)/100, math.Round(me*100)/100, f
				}
			}
		}
	}
	g.Eff = e
	return e
}
