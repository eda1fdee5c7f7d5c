package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"github.com/blis-sim/blis/lib/roofline"
)

// commSample is one measured all-reduce: n ranks, bytes, µs.
type commSample struct {
	n           int
	bytes, meas float64
	train       bool
}

// customMaxBytes is vLLM's custom all-reduce limit (8 MiB): smaller
// messages use it (inside CUDA graphs for decode-sized steps), larger ones
// NCCL. Each message size is judged on the implementation vLLM would use.
const customMaxBytes = 8 << 20

// loadComm reads the aiconfigurator all-reduce tables of a GPU. message_size
// counts elements (the int8 rows of the NCCL table are faster than the half
// rows at the same size), so bytes = 2 × message_size for bf16/half.
func loadComm(kdir, gpu string, maxRanks int) ([]commSample, error) {
	var out []commSample
	add := func(n int, elems, ms float64, key string) {
		b := elems * 2
		if n > maxRanks || b > 256<<20 || !(ms > 0) {
			return
		}
		out = append(out, commSample{n: n, bytes: b, meas: ms * 1000, train: !heldOut(key)})
	}
	if custom, _ := filepath.Glob(filepath.Join(kdir, gpu+"_comm_vllm_*_custom_allreduce_perf.csv")); len(custom) == 1 {
		t, err := readCSV(custom[0])
		if err != nil {
			return nil, err
		}
		for _, r := range t.rows {
			if r[t.col["backend"]] != "vllm_graph" || r[t.col["allreduce_dtype"]] != "bfloat16" {
				continue
			}
			if e := t.f(r, "message_size"); e*2 <= customMaxBytes {
				add(int(t.f(r, "num_gpus")), e, t.f(r, "latency"), r[t.col["num_gpus"]]+"/"+r[t.col["message_size"]])
			}
		}
	}
	nccl, _ := filepath.Glob(filepath.Join(kdir, gpu+"_comm_nccl_*_nccl_perf.csv"))
	for _, p := range nccl {
		t, err := readCSV(p)
		if err != nil {
			return nil, err
		}
		hasCustom := len(out) > 0
		for _, r := range t.rows {
			if r[t.col["op_name"]] != "all_reduce" || r[t.col["nccl_dtype"]] != "half" {
				continue
			}
			if e := t.f(r, "message_size"); !hasCustom || e*2 > customMaxBytes {
				add(int(t.f(r, "num_gpus")), e, t.f(r, "latency"), r[t.col["num_gpus"]]+"/"+r[t.col["message_size"]])
			}
		}
	}
	return out, nil
}

// commErr is the median absolute percentage error and median signed error
// of g's all-reduce cost on the samples (which: 0 train, 1 held out, 2 all).
func commErr(g *roofline.GPU, ss []commSample, which int) (md, bias float64, n int) {
	var ape, lr []float64
	for _, s := range ss {
		if which == 0 && !s.train || which == 1 && s.train {
			continue
		}
		p := g.AllReduceUS(s.bytes, s.n)
		ape = append(ape, math.Abs(p-s.meas)/s.meas*100)
		lr = append(lr, math.Log(p/s.meas))
	}
	return median(ape), (math.Exp(median(lr)) - 1) * 100, len(ape)
}

// calibrateLink fits the two terms where each shows: the small-message
// latency is the median time of training messages up to 64 KiB (bandwidth
// adds < 1 µs there), then the link efficiency minimises the median absolute
// log error on training messages of 1 MiB and more (latency < 10% there).
func calibrateLink(g roofline.GPU, ss []commSample) (lat, eff float64) {
	var small []float64
	for _, s := range ss {
		if s.train && s.bytes <= 64<<10 {
			small = append(small, s.meas)
		}
	}
	lat = math.Round(median(small)*2) / 2
	g.LinkLatUS = lat
	best := math.Inf(1)
	for e := 0.10; e <= 1.0001; e += 0.01 {
		g.Eff.Link = e
		var v []float64
		for _, s := range ss {
			if s.train && s.bytes >= 1<<20 {
				v = append(v, math.Abs(math.Log(g.AllReduceUS(s.bytes, s.n)/s.meas)))
			}
		}
		if m := median(v); m < best-1e-12 {
			best, eff = m, math.Round(e*100)/100
		}
	}
	return lat, eff
}

// commLevel judges the all-reduce cost on the measured tables; with
// calibrate it prints the fitted latency and link efficiency too.
func commLevel(data string, calibrate bool, w io.Writer) error {
	kdir := filepath.Join(data, "measurements/aiconfigurator/kernels")
	sets := []struct {
		gpu, file string
		maxRanks  int
	}{
		{"h100", "h100_sxm", 8}, {"h200", "h200_sxm", 8}, {"a100-80gb", "a100_sxm", 8},
		// PCIe: only TP2 is a ring over direct P2P; TP4/8 cross the host and
		// run 4–15× slower, which one efficiency cannot describe.
		{"l40s", "l40s", 2},
	}
	type loaded struct {
		gpu string
		ss  []commSample
	}
	var all []loaded
	for _, s := range sets {
		ss, err := loadComm(kdir, s.file, s.maxRanks)
		if err != nil {
			return err
		}
		if len(ss) == 0 {
			continue
		}
		all = append(all, loaded{s.gpu, ss})
		if calibrate {
			g, _ := roofline.LookupGPU(s.gpu)
			lat, eff := calibrateLink(g, ss)
			fmt.Fprintf(w, "calibrated %s: LinkLatUS %.1f, Link %.2f (profile: %.1f µs, %.2f)\n", s.gpu, lat, eff, g.LinkLatUS, g.Eff.Link)
		}
	}
	if calibrate {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "### All-reduce (aiconfigurator tables: vLLM custom all-reduce in CUDA graphs up to 8 MiB, NCCL above; bf16; held-out = message sizes not used for calibration)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| GPU | TP | rows held-out | MdAPE held-out | median bias | MdAPE ≥ 1 MiB (all rows) | bias ≥ 1 MiB |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, l := range all {
		s, ss := l, l.ss
		g, _ := roofline.LookupGPU(s.gpu)
		for _, n := range []int{2, 4, 8} {
			var sub, big []commSample
			for _, x := range ss {
				if x.n == n {
					sub = append(sub, x)
					if x.bytes >= 1<<20 {
						big = append(big, x)
					}
				}
			}
			if len(sub) == 0 {
				continue
			}
			md, bias, nh := commErr(&g, sub, 1)
			mb, bb, _ := commErr(&g, big, 2)
			fmt.Fprintf(w, "| %s | %s | %d | %.1f%% | %+.1f%% | %.1f%% | %+.1f%% |\n", s.gpu, strconv.Itoa(n), nh, md, bias, mb, bb)
		}
	}
	fmt.Fprintln(w)
	return nil
}
