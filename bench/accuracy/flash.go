package main

import (
	"fmt"
	"io"
	"math"

	"github.com/blis-sim/blis/lib/roofline"
)

// Prefill attention by tiles and waves (lib/roofline/flash.go) against the
// context-attention tables: where the error sits by head size and length,
// before (FLOPs and bytes at efficiency.attention) and after, and how the
// fitted constants carry from one GPU to another.

// flashBands are the length bands of the breakdown (tokens per sequence).
var flashBands = []struct {
	name   string
	lo, hi float64
}{{"1–64", 1, 64}, {"128–512", 128, 512}, {"1k–2k", 1024, 2048}, {"3k–6k", 3072, 6144}, {"8k–16k", 8192, 16384}}

// ctxErr is the MdAPE and median bias (%) of g on the rows keep selects.
func ctxErr(g *roofline.GPU, ss []sample, keep func(sample) bool) (n int, md, bias float64) {
	var ape, lr []float64
	for _, s := range ss {
		if !keep(s) {
			continue
		}
		p := predict(g, kCtx, s)
		ape = append(ape, math.Abs(p-s.meas)/s.meas*100)
		lr = append(lr, math.Log(p/s.meas))
	}
	return len(ape), median(ape), (math.Exp(median(lr)) - 1) * 100
}

// flashLoss is the summed median absolute log error of kernel k on the
// training rows (head_dim ≤ 256: the larger ones run FlashAttention 4) of
// each GPU given.
func flashLoss(k roofline.FlashKernel, gs []roofline.GPU, sets [][]sample, train bool) float64 {
	var sum float64
	for i, g := range gs {
		own := k
		own.Kernel = g.Eff.Flash.Kernel // constants shared, each GPU's own tiles
		g.Eff.Flash = own
		v := make([]float64, 0, len(sets[i]))
		for _, s := range sets[i] {
			if s.e <= 256 && (!train || s.train) {
				v = append(v, math.Abs(math.Log(predict(&g, kCtx, s)/s.meas)))
			}
		}
		sum += median(v)
	}
	return sum
}

// fitFlash is coordinate descent from k over the four constants (steps
// 0.01, 0.05, 0.25 µs, 0.5 µs), minimising flashLoss.
func fitFlash(k roofline.FlashKernel, gs []roofline.GPU, sets [][]sample, train bool) roofline.FlashKernel {
	best := flashLoss(k, gs, sets, train)
	fields := []struct {
		p    func(*roofline.FlashKernel) *float64
		step float64
		max  float64
	}{
		{func(k *roofline.FlashKernel) *float64 { return &k.MMA }, 0.01, 1},
		{func(k *roofline.FlashKernel) *float64 { return &k.Softmax }, 0.05, math.Inf(1)},
		{func(k *roofline.FlashKernel) *float64 { return &k.CTAUS }, 0.25, math.Inf(1)},
		{func(k *roofline.FlashKernel) *float64 { return &k.FloorUS }, 0.5, math.Inf(1)},
	}
	for pass := 0; pass < 5; pass++ {
		for _, f := range fields {
			for _, d := range []float64{-2, -1, 1, 2} {
				c := k
				v := f.p(&c)
				*v = math.Round((*v+d*f.step)*1e4) / 1e4
				if *v < 0 || *v > f.max || (f.max == 1 && *v == 0) {
					continue
				}
				if l := flashLoss(c, gs, sets, train); l < best {
					best, k = l, c
				}
			}
		}
	}
	return k
}

func flashLevel(sets []*gpuTables, calibrate bool, w io.Writer) {
	byName := map[string]*gpuTables{}
	for _, s := range sets {
		byName[s.gpu] = s
	}
	lookup := func(n string) roofline.GPU { g, _ := roofline.LookupGPU(n); return g }
	if calibrate {
		h := lookup("h100")
		fa3 := fitFlash(h.Eff.Flash, []roofline.GPU{h}, [][]sample{byName["h100"].ctxS}, true)
		a, l := lookup("a100-80gb"), lookup("l40s")
		fa2 := fitFlash(a.Eff.Flash, []roofline.GPU{a, l}, [][]sample{byName["a100-80gb"].ctxS, byName["l40s"].ctxS}, true)
		fmt.Fprintf(w, "calibrated prefill attention: fa3 (H100) %+v; fa2 (A100 + L40S) %+v\n\n", fa3, fa2)
	}
	fmt.Fprintln(w, "### Prefill attention by head size and length (context-attention tables, held-out shapes)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Before: FLOPs and bytes at efficiency.attention; after: tiles and waves (prefill_attention). MdAPE (median bias).")
	fmt.Fprintln(w)
	head := "| GPU | head_dim | rows |"
	sep := "|---|---:|---:|"
	for _, b := range flashBands {
		head += " " + b.name + " before | after |"
		sep += "---:|---:|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, sep)
	for _, s := range sets {
		after := lookup(s.gpu)
		before := after
		before.Eff.Flash = roofline.FlashKernel{}
		for _, hd := range []float64{64, 128, 192, 256, 512} {
			n, _, _ := ctxErr(&after, s.ctxS, func(x sample) bool { return !x.train && x.e == hd })
			if n == 0 {
				continue
			}
			line := fmt.Sprintf("| %s | %.0f | %d |", s.gpu, hd, n)
			for _, b := range flashBands {
				keep := func(x sample) bool { return !x.train && x.e == hd && x.b >= b.lo && x.b <= b.hi }
				_, m0, b0 := ctxErr(&before, s.ctxS, keep)
				_, m1, b1 := ctxErr(&after, s.ctxS, keep)
				line += fmt.Sprintf(" %.0f%% (%+.0f%%) | %.0f%% (%+.0f%%) |", m0, b0, m1, b1)
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintln(w)
	// Leave one GPU out: FA2's constants fitted on one of its GPUs and
	// judged on every row of the other; and all three GPUs' constants
	// shared, fitted on two and judged on the third (the FA3 kernel
	// against constants of FA2's).
	fmt.Fprintln(w, "Leave one GPU out (constants fitted on every shape of the other GPUs, head_dim ≤ 256; judged on every row of the held-out GPU):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| held-out GPU | fitted on | constants (mma, softmax, cta_us, floor_us) | rows | MdAPE | median bias | before: MdAPE (bias) |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|")
	type logo struct {
		held string
		on   []string
	}
	for _, c := range []logo{{"a100-80gb", []string{"l40s"}}, {"l40s", []string{"a100-80gb"}}, {"h100", []string{"a100-80gb", "l40s"}}, {"a100-80gb", []string{"h100", "l40s"}}, {"l40s", []string{"h100", "a100-80gb"}}} {
		var gs []roofline.GPU
		var ss [][]sample
		for _, n := range c.on {
			gs = append(gs, lookup(n))
			ss = append(ss, byName[n].ctxS)
		}
		held := lookup(c.held)
		k := fitFlash(gs[0].Eff.Flash, gs, ss, false)
		k.Kernel = held.Eff.Flash.Kernel // the held-out GPU runs its own kernel's tiles
		before := held
		before.Eff.Flash = roofline.FlashKernel{}
		_, m0, b0 := ctxErr(&before, byName[c.held].ctxS, func(sample) bool { return true })
		held.Eff.Flash = k
		n, m, b := ctxErr(&held, byName[c.held].ctxS, func(sample) bool { return true })
		on := c.on[0]
		if len(c.on) > 1 {
			on += " + " + c.on[1]
		}
		fmt.Fprintf(w, "| %s | %s | %.2f, %.2f, %.2f, %.1f | %d | %.1f%% | %+.1f%% | %.1f%% (%+.1f%%) |\n", c.held, on, k.MMA, k.Softmax, k.CTAUS, k.FloorUS, n, m, b, m0, b0)
	}
	fmt.Fprintln(w)
}
