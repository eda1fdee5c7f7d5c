// Command accuracy measures the roofline against real measurements: kernel
// level (aiconfigurator GEMM and attention tables) and step level (Splitwise
// Llama2-70B prefill and decode iterations). It prints Markdown tables for
// docs/latency.md. With -calibrate it also grid-searches the efficiency
// profile of each GPU on the training half of its kernel tables (shapes
// split by a hash of the weight / head shape, so held-out rows are shapes
// never seen in calibration) and prints the values to paste into
// lib/roofline/gpu_eff.go.
//
//	go run ./bench/accuracy [-data ../shared/data] [-calibrate]
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

func main() {
	data := flag.String("data", "../shared/data", "shared data directory")
	calibrate := flag.Bool("calibrate", false, "grid-search efficiency factors on the training shapes and print them")
	catalog := flag.Bool("catalog", false, "print the model and GPU catalogue tables and exit")
	serving := flag.Bool("serving", false, "only the serving-level comparison (simulates silicon_sample.csv H100 vLLM points)")
	flag.Parse()
	if *catalog {
		printCatalog(os.Stdout)
		return
	}
	if _, err := os.Stat(*data); err != nil {
		fmt.Fprintf(os.Stderr, "accuracy: %s not found: this harness replays the public measurements kept beside the repository (../shared/data, listed in its README); give their directory with -data DIR\n", *data)
		os.Exit(2)
	}
	if *serving {
		if err := servingLevel(*data, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "accuracy:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*data, *calibrate, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "accuracy:", err)
		os.Exit(1)
	}
}

type table struct {
	head []string
	rows [][]string
	col  map[string]int
}

func readCSV(path string) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t := &table{head: head, col: map[string]int{}}
	for i, h := range head {
		t.col[h] = i
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		t.rows = append(t.rows, rec)
	}
	return t, nil
}

func (t *table) f(row []string, name string) float64 {
	v, err := strconv.ParseFloat(row[t.col[name]], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// sample is one measured kernel or step with what the model needs to predict it.
type sample struct {
	a, b, c, d, e float64 // shape fields, meaning depends on the table
	meas          float64 // µs
	train         bool
}

func heldOut(key string) bool {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()%2 == 1
}

type kind int

const (
	kGEMM kind = iota
	kCtx
	kGen
)

func loadKernels(path string, k kind) ([]sample, error) {
	t, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	var out []sample
	for _, r := range t.rows {
		var s sample
		var key string
		switch k {
		case kGEMM:
			s = sample{a: t.f(r, "m"), b: t.f(r, "n"), c: t.f(r, "k")}
			key = r[t.col["n"]] + "x" + r[t.col["k"]]
		case kCtx:
			s = sample{a: t.f(r, "batch_size"), b: t.f(r, "isl"), c: t.f(r, "num_heads"), d: t.f(r, "num_kv_heads"), e: t.f(r, "head_dim")}
			key = r[t.col["num_heads"]] + "/" + r[t.col["num_kv_heads"]] + "/" + r[t.col["head_dim"]] + "/" + r[t.col["isl"]]
		case kGen:
			s = sample{a: t.f(r, "batch_size"), b: t.f(r, "kv_history_len"), c: t.f(r, "num_heads"), d: t.f(r, "num_kv_heads"), e: t.f(r, "head_dim")}
			key = r[t.col["num_heads"]] + "/" + r[t.col["num_kv_heads"]] + "/" + r[t.col["head_dim"]] + "/" + r[t.col["kv_history_len"]]
		}
		s.meas = t.f(r, "latency_ms") * 1000
		if math.IsNaN(s.meas) || s.meas <= 0 {
			continue
		}
		s.train = !heldOut(key)
		out = append(out, s)
	}
	return out, nil
}

func predict(g *roofline.GPU, k kind, s sample) float64 {
	switch k {
	case kGEMM:
		return g.GEMMUS(s.a, s.b, s.c, roofline.BF16, roofline.BF16)
	case kCtx:
		return g.ContextAttentionUS(s.a, s.b, s.c, s.d, int(s.e))
	default:
		f, b := roofline.DecodeAttention(s.a, s.b, s.c, s.d, s.e, 2)
		return g.AttentionUS(f, b)
	}
}

// errs returns absolute percentage errors and signed log ratios for the held-out (or all) samples.
func mdape(g *roofline.GPU, k kind, ss []sample, which int) (md float64, n int, bias float64) {
	var ape, lr []float64
	for _, s := range ss {
		if which == 0 && !s.train || which == 1 && s.train {
			continue
		}
		p := predict(g, k, s)
		ape = append(ape, math.Abs(p-s.meas)/s.meas*100)
		lr = append(lr, math.Log(p/s.meas))
	}
	return median(ape), len(ape), (math.Exp(median(lr)) - 1) * 100
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loss is the median absolute log error on training rows.
func loss(g *roofline.GPU, k kind, ss []sample) float64 {
	v := make([]float64, 0, len(ss))
	for _, s := range ss {
		if s.train {
			v = append(v, math.Abs(math.Log(predict(g, k, s)/s.meas)))
		}
	}
	return median(v)
}

type gpuTables struct {
	gpu               string
	gemm, ctx, gen    string
	gemmS, ctxS, genS []sample
}

func run(data string, calibrate bool, w io.Writer) error {
	kdir := filepath.Join(data, "measurements/aiconfigurator/kernels")
	sets := []*gpuTables{
		{gpu: "h100", gemm: "h100_sxm_gemm_vllm_0.24.0_gemm_perf__bfloat16.csv",
			ctx: "h100_sxm_attention_vllm_0.24.0_context_attention_perf__bf16kv_fullattn.csv",
			gen: "h100_sxm_attention_vllm_0.24.0_generation_attention_perf__bf16kv_fullattn.csv"},
		{gpu: "a100-80gb", gemm: "a100_sxm_gemm_vllm_0.14.0_gemm_perf__bfloat16.csv",
			ctx: "a100_sxm_attention_vllm_0.14.0_context_attention_perf__bf16kv_fullattn.csv",
			gen: "a100_sxm_attention_vllm_0.14.0_generation_attention_perf__bf16kv_fullattn.csv"},
		{gpu: "l40s", gemm: "l40s_gemm_vllm_0.24.0_gemm_perf__bfloat16.csv",
			ctx: "l40s_attention_vllm_0.24.0_context_attention_perf__bf16kv_fullattn.csv",
			gen: "l40s_attention_vllm_0.24.0_generation_attention_perf__bf16kv_fullattn.csv"},
	}
	for _, s := range sets {
		var err error
		if s.gemmS, err = loadKernels(filepath.Join(kdir, s.gemm), kGEMM); err != nil {
			return err
		}
		if s.ctxS, err = loadKernels(filepath.Join(kdir, s.ctx), kCtx); err != nil {
			return err
		}
		if s.genS, err = loadKernels(filepath.Join(kdir, s.gen), kGen); err != nil {
			return err
		}
	}
	if calibrate {
		for _, s := range sets {
			g, _ := roofline.LookupGPU(s.gpu)
			e := calibrateGPU(&g, s)
			fmt.Fprintf(w, "calibrated %s: GEMM: %.2f, Attention: %.2f, Memory: %.2f, KernelUS: %.1f, AttnUS: %.0f\n", s.gpu, e.GEMM, e.Attention, e.Memory, e.KernelUS, e.AttnUS)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "### Kernel level (aiconfigurator tables; held-out = shapes not used for calibration)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| GPU | table | rows held-out | MdAPE held-out | MdAPE all | median bias (pred/meas − 1) |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, s := range sets {
		g, _ := roofline.LookupGPU(s.gpu)
		for _, tk := range []struct {
			name string
			k    kind
			ss   []sample
		}{{"GEMM bf16", kGEMM, s.gemmS}, {"context attention", kCtx, s.ctxS}, {"generation attention", kGen, s.genS}} {
			mh, nh, _ := mdape(&g, tk.k, tk.ss, 1)
			ma, _, bias := mdape(&g, tk.k, tk.ss, 2)
			fmt.Fprintf(w, "| %s | %s | %d | %.1f%% | %.1f%% | %+.1f%% |\n", s.gpu, tk.name, nh, mh, ma, bias)
		}
	}
	fmt.Fprintln(w)
	flashLevel(sets, calibrate, w)
	// Breakdown of the H100 GEMM error by size, to show where the roofline misses.
	h, _ := roofline.LookupGPU("h100")
	fmt.Fprintln(w, "H100 GEMM error by FLOP size (all rows):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| 2mnk | rows | MdAPE | median bias |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	bins := []float64{0, 1e8, 1e9, 1e10, 1e11, 1e12, math.Inf(1)}
	for i := 0; i+1 < len(bins); i++ {
		var sub []sample
		for _, s := range sets[0].gemmS {
			f := 2 * s.a * s.b * s.c
			if f >= bins[i] && f < bins[i+1] {
				sub = append(sub, s)
			}
		}
		m, n, b := mdape(&h, kGEMM, sub, 2)
		fmt.Fprintf(w, "| %s | %d | %.1f%% | %+.1f%% |\n", binName(bins[i], bins[i+1]), n, m, b)
	}
	fmt.Fprintln(w)
	if err := commLevel(data, calibrate, w); err != nil {
		return err
	}
	if err := rtxProLevel(data, calibrate, w); err != nil {
		return err
	}
	if err := layerLevel(data, w); err != nil {
		return err
	}
	return stepLevel(data, w)
}

func binName(lo, hi float64) string {
	if math.IsInf(hi, 1) {
		return fmt.Sprintf("≥ %.0e", lo)
	}
	if lo == 0 {
		return fmt.Sprintf("< %.0e", hi)
	}
	return fmt.Sprintf("%.0e – %.0e", lo, hi)
}

// calibrateGPU grid-searches GEMM efficiency, memory efficiency and the
// kernel floor on training GEMM shapes, then attention efficiency on
// training context-attention shapes (memory efficiency and floor fixed).
func calibrateGPU(g *roofline.GPU, s *gpuTables) roofline.Efficiency {
	best := math.Inf(1)
	e := g.Eff
	for ge := 0.40; ge <= 1.0001; ge += 0.02 {
		for me := 0.50; me <= 1.0001; me += 0.05 {
			for f := 0.0; f <= 12.0001; f += 0.5 {
				g.Eff.GEMM, g.Eff.Memory, g.Eff.KernelUS = ge, me, f
				if l := loss(g, kGEMM, s.gemmS); l < best {
					best, e.GEMM, e.Memory, e.KernelUS = l, ge, me, f
				}
			}
		}
	}
	g.Eff.GEMM, g.Eff.Memory, g.Eff.KernelUS = e.GEMM, e.Memory, e.KernelUS
	best = math.Inf(1)
	for ae := 0.20; ae <= 1.0001; ae += 0.02 {
		for f := 0.0; f <= 30.0001; f += 1 {
			g.Eff.Attention, g.Eff.AttnUS = ae, f
			if l := loss(g, kCtx, s.ctxS) + loss(g, kGen, s.genS); l < best {
				best, e.Attention, e.AttnUS = l, ae, f
			}
		}
	}
	g.Eff = e
	return e
}

// stepRow is one Splitwise measurement as two batches.
type stepRow struct {
	hw       string
	tp       int
	pre, dec latency.Batch
	mp, md   float64 // measured µs
}

func loadSplitwise(data string) ([]stepRow, error) {
	t, err := readCSV(filepath.Join(data, "measurements/splitwise/perf_model.csv"))
	if err != nil {
		return nil, err
	}
	var out []stepRow
	for _, r := range t.rows {
		if r[t.col["model"]] != "llama2-70b" {
			continue
		}
		p, bs, n := int64(t.f(r, "prompt_size")), int(t.f(r, "batch_size")), int64(t.f(r, "token_size"))
		out = append(out, stepRow{
			hw: r[t.col["hardware"]], tp: int(t.f(r, "tensor_parallel")),
			pre: latency.Batch{PrefillSeqs: bs, PrefillTokens: int64(bs) * p, PrefillAttn: int64(bs) * p * (p + 1) / 2},
			// Mean decode iteration: context grows from p to p+n−1.
			dec: latency.Batch{DecodeSeqs: bs, DecodeCtx: int64(bs) * (p + n/2)},
			mp:  t.f(r, "prompt_time") * 1000, md: t.f(r, "token_time") * 1000,
		})
	}
	return out, nil
}

var splitwiseGPU = map[string]string{"a100-80gb": "a100-80gb", "h100-80gb": "h100", "h100-80gb-pcap": "h100"}

type stepErr struct{ pre, dec, preB, decB []float64 }

func (e *stepErr) add(pp, mp, pd, md float64) {
	e.pre = append(e.pre, math.Abs(pp-mp)/mp*100)
	e.dec = append(e.dec, math.Abs(pd-md)/md*100)
	e.preB = append(e.preB, math.Log(pp/mp))
	e.decB = append(e.decB, math.Log(pd/md))
}

func evalSteps(rows []stepRow, arch *roofline.Arch, eff map[string]roofline.Efficiency, keep func(stepRow) bool) (map[string]*stepErr, error) {
	res := map[string]*stepErr{}
	for _, r := range rows {
		if !keep(r) {
			continue
		}
		g, _ := roofline.LookupGPU(splitwiseGPU[r.hw])
		if e, ok := eff[r.hw]; ok {
			g.Eff = e
		}
		rf, err := roofline.New(arch, g, r.tp)
		if err != nil {
			return nil, err
		}
		k := fmt.Sprintf("%s|%d", r.hw, r.tp)
		if res[k] == nil {
			res[k] = &stepErr{}
		}
		// A synchronous 2023 stack: the engine's CPU work adds to each step.
		pre := rf.Terms(&r.pre).TotalUS + float64(rf.HostStepUS(&r.pre))
		dec := rf.Terms(&r.dec).TotalUS + float64(rf.HostStepUS(&r.dec))
		res[k].add(pre, r.mp, dec, r.md)
	}
	return res, nil
}

func printSteps(w io.Writer, res map[string]*stepErr) {
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := strings.Split(keys[i], "|"), strings.Split(keys[j], "|")
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		x, _ := strconv.Atoi(a[1])
		y, _ := strconv.Atoi(b[1])
		return x < y
	})
	fmt.Fprintln(w, "| hardware | TP | rows | prefill MdAPE | prefill bias | decode-iteration MdAPE | decode bias |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		a, p := res[k], strings.Split(k, "|")
		fmt.Fprintf(w, "| %s | %s | %d | %.1f%% | %+.1f%% | %.1f%% | %+.1f%% |\n", p[0], p[1], len(a.pre),
			median(a.pre), (math.Exp(median(a.preB))-1)*100, median(a.dec), (math.Exp(median(a.decB))-1)*100)
	}
	fmt.Fprintln(w)
}

// stepLevel compares prefill and decode-iteration times of Llama2-70B with
// the Splitwise measurements: first with the kernel-calibrated profiles
// (nothing fitted to these rows), then with an engine profile (GEMM and
// attention efficiency, per-layer and per-step overhead) fitted on the TP2
// rows of each hardware and evaluated on the held-out TP4 and TP8 rows.
func stepLevel(data string, w io.Writer) error {
	rows, err := loadSplitwise(data)
	if err != nil {
		return err
	}
	arch, err := roofline.LoadModel("llama-2-70b")
	if err != nil {
		return err
	}
	all := func(stepRow) bool { return true }
	res, err := evalSteps(rows, arch, nil, all)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "### Step level (Splitwise perf_model.csv, Llama2-70B fp16): kernel-calibrated profile, nothing fitted to these rows")
	fmt.Fprintln(w)
	printSteps(w, res)

	eff := map[string]roofline.Efficiency{}
	for _, hw := range []string{"a100-80gb", "h100-80gb", "h100-80gb-pcap"} {
		g, _ := roofline.LookupGPU(splitwiseGPU[hw])
		best, be := math.Inf(1), g.Eff
		for ge := 0.1; ge <= 0.8001; ge += 0.05 {
			for lu := 0.0; lu <= 500; lu += 10 {
				for su := 0.0; su <= 20000; su += 2000 {
					e := g.Eff
					e.GEMM, e.Attention, e.LayerUS, e.StepUS = ge, math.Min(ge, g.Eff.Attention), lu, su
					r, err := evalSteps(rows, arch, map[string]roofline.Efficiency{hw: e}, func(r stepRow) bool { return r.hw == hw && r.tp == 2 })
					if err != nil {
						return err
					}
					var l []float64
					for _, v := range r {
						for i := range v.preB {
							l = append(l, math.Abs(v.preB[i]), math.Abs(v.decB[i]))
						}
					}
					if m := median(l); m < best {
						best, be = m, e
					}
				}
			}
		}
		eff[hw] = be
	}
	res, err = evalSteps(rows, arch, eff, func(r stepRow) bool { return r.tp != 2 })
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "### Step level: engine profile fitted on TP2 rows, held-out TP4/TP8 rows")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| hardware | fitted GEMM eff | attention eff | layer overhead µs | step overhead µs |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, hw := range []string{"a100-80gb", "h100-80gb", "h100-80gb-pcap"} {
		e := eff[hw]
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.0f | %.0f |\n", hw, e.GEMM, e.Attention, e.LayerUS, e.StepUS)
	}
	fmt.Fprintln(w)
	printSteps(w, res)
	return nil
}

// printCatalog writes the catalogue tables of docs/latency.md.
func printCatalog(w io.Writer) {
	fmt.Fprintln(w, "| name | HF id | layers (MoE) | hidden | heads / KV | attention | experts (top-k, shared width) | weights | params total / active | KV bytes/token (tp1, bf16 KV) |")
	fmt.Fprintln(w, "|---|---|---|---:|---|---|---|---|---|---:|")
	for _, m := range roofline.Models {
		a, err := roofline.LoadModel(m.ID)
		if err != nil {
			fmt.Fprintln(w, "error:", err)
			continue
		}
		attn := fmt.Sprintf("GQA hd %d", a.HeadDim)
		if a.KVHeads == a.Heads {
			attn = fmt.Sprintf("MHA hd %d", a.HeadDim)
		}
		if a.MLA() {
			attn = fmt.Sprintf("MLA kv_lora %d rope %d", a.KVLoraRank, a.QKRopeDim)
		}
		moe := "—"
		if a.MoE() {
			moe = fmt.Sprintf("%d (top %d, shared %d)", a.Experts, a.ExpertsPerTok, a.SharedIntermediate)
		}
		kv := *a
		kv.KVDtype = roofline.BF16
		fmt.Fprintf(w, "| %s | %s | %d (%d) | %d | %d / %d | %s | %s | %s | %.1fB / %.1fB | %.0f |\n", m.ShortName(), m.ID, a.Layers, a.MoELayers,
			a.Hidden, a.Heads, a.KVHeads, attn, moe, a.WeightDtype, a.TotalParams()/1e9, a.ActiveParams()/1e9, kv.KVBytesPerTokenRank(1))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| GPU | aliases | BF16 TFLOP/s | FP8 | FP4 | HBM TB/s | memory GiB | link GB/s (per dir.) | link latency µs | SMs / MHz / smem KiB | GEMM / attn / mem / link eff. | GEMM / attn floor µs | prefill attention (mma / softmax / CTA µs / floor µs) | source |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|")
	for _, n := range roofline.GPUNames() {
		g, _ := roofline.LookupGPU(n)
		e := g.Eff
		chip, fl := "—", "— (FLOPs at attn eff.)"
		if g.SMs > 0 {
			chip = fmt.Sprintf("%d / %g / %g", g.SMs, g.ClockMHz, g.SmemKiB)
		}
		if k := e.Flash; k.On() {
			fl = fmt.Sprintf("%s: %.2f / %.2f / %g / %g", k.Kernel, k.MMA, k.Softmax, k.CTAUS, k.FloorUS)
		}
		fmt.Fprintf(w, "| %s | %s | %g | %g | %g | %g | %g | %g | %g | %s | %.2f / %.2f / %.2f / %.2f | %g / %g | %s | %s |\n", g.Name, strings.Join(g.Aliases, ", "),
			g.BF16TFLOPS, g.FP8TFLOPS, g.FP4TFLOPS, g.HBMTBps, g.MemoryGiB, g.LinkGBps, g.LinkLatUS, chip, e.GEMM, e.Attention, e.Memory, e.Link, e.KernelUS, e.AttnUS, fl, g.Source)
	}
}
