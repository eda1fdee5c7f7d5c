package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/measure"

	"github.com/blis-sim/blis/lib/roofline"
)

// servingLevel simulates every H100 vLLM closed-loop point of
// silicon_sample.csv whose model is in the catalogue with the roofline (no
// fitted coefficients, --latency roofline) on the blis-sim engine with the
// limits each point was measured with, and compares mean TTFT and TPOT.
func servingLevel(data string, w io.Writer) error {
	path := filepath.Join(data, "measurements/aiconfigurator/silicon_sample.csv")
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pts, st, err := measure.ReadServingPoints(path, f, measure.ServingFilter{GPU: "h100_sxm", Engine: "vllm"})
	if err != nil {
		return err
	}
	type acc struct{ ttft, tpot, ttftB, tpotB []float64 }
	res := map[string]*acc{}
	skipped := map[string]int{}
	setups := map[string]*fit.Setup{}
	if st.Duplicates > 0 {
		skipped["exact duplicates of another row (one measurement published twice), read once"] = st.Duplicates
	}
	var allTTFT, allTPOT []float64
	for _, p := range pts {
		if _, ok := roofline.LookupModel(p.Model); !ok {
			skipped[p.Model+" (not in catalogue)"]++
			continue
		}
		// The deployment as bench/fidelity and blis-calibrate set it up
		// (async scheduling by vLLM version, KV from memory), once per
		// deployment; each point runs with the engine limits it was
		// measured with (fit.BenchmarkLimits).
		setup, ok := setups[p.Group()]
		if !ok {
			setup, err = fit.ServingSetup(fit.Deployment{}, p)
			if err != nil {
				skipped[fmt.Sprintf("%s tp%d: %v", p.Model, p.TP, err)]++
				continue
			}
			setups[p.Group()] = setup
		}
		ttft, tpot, err := fit.SimulateServingPoint(setup.Resolved.Model, setup.PointEngine(p), p)
		if err != nil {
			skipped[fmt.Sprintf("%s tp%d: %v", p.Model, p.TP, err)]++
			continue
		}
		k := p.Group()
		if res[k] == nil {
			res[k] = &acc{}
		}
		a := res[k]
		e1, e2 := math.Abs(ttft-p.TTFTus)/p.TTFTus*100, math.Abs(tpot-p.TPOTus)/p.TPOTus*100
		a.ttft, a.tpot = append(a.ttft, e1), append(a.tpot, e2)
		a.ttftB, a.tpotB = append(a.ttftB, math.Log(ttft/p.TTFTus)), append(a.tpotB, math.Log(tpot/p.TPOTus))
		allTTFT, allTPOT = append(allTTFT, e1), append(allTPOT, e2)
	}
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "### Serving level (silicon_sample.csv, H100 vLLM closed loop, roofline on the blis-sim engine, each point's measured engine limits)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| deployment | points | mean-TTFT MdAPE | TTFT bias | mean-TPOT MdAPE | TPOT bias |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		a := res[k]
		fmt.Fprintf(w, "| %s | %d | %.1f%% | %+.1f%% | %.1f%% | %+.1f%% |\n", k, len(a.ttft), median(a.ttft),
			(math.Exp(median(a.ttftB))-1)*100, median(a.tpot), (math.Exp(median(a.tpotB))-1)*100)
	}
	fmt.Fprintf(w, "| all | %d | %.1f%% | | %.1f%% | |\n", len(allTTFT), median(allTTFT), median(allTPOT))
	fmt.Fprintln(w)
	sk := make([]string, 0, len(skipped))
	for k := range skipped {
		sk = append(sk, k)
	}
	sort.Strings(sk)
	for _, k := range sk {
		fmt.Fprintf(w, "- skipped %d points: %s\n", skipped[k], k)
	}
	fmt.Fprintln(w)
	return nil
}
