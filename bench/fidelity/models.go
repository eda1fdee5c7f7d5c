package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/roofline"
)

// resolveFor picks the latency model blis-sim would use with --latency mode
// for the deployment (auto: a shipped coefficients file when one matches,
// the roofline otherwise; no engine or version narrowing, as blis-sim).
func resolveFor(mode string, dep fit.Deployment) (*resolve.Resolved, error) {
	r, err := resolve.Resolve(resolve.Spec{Mode: mode, Model: dep.Model, GPU: dep.GPU, TP: dep.TP,
		WeightDtype: dep.WeightDtype, KVDtype: dep.KVDtype, Engine: stackOf(dep)})
	if err == nil && r.Coeffs == nil && alpha0Override >= 0 {
		r.Model = alphaModel(r.Model, alpha0Override)
	}
	if err == nil && r.Coeffs == nil && seqGPUProbeUS > 0 {
		r.Model = seqGPUModel(r.Model, seqGPUProbeUS)
	}
	if err == nil && r.Coeffs == nil && stepScaleProbe != 1 {
		r.Model = scaledModel(r.Model, stepScaleProbe)
	}
	return r, err
}

// seqGPUProbeUS (µs), when > 0, adds that much GPU time per request in
// every roofline step, on the step's path under either scheduler
// (-seq-gpu-us: how the tables move with a per-request decode cost the
// roofline does not charge; docs/latency.md, "Issue 27, second pass").
var seqGPUProbeUS = 0.0

// seqGPUModel is m with us µs per request added to every step.
func seqGPUModel(m latency.Model, us float64) latency.Model {
	return probed(m, func(b *latency.Batch, t int64) int64 { return t + int64(us*float64(b.Size())+0.5) })
}

// stepScaleProbe, when not 1, multiplies every roofline step's time
// (-step-scale: how the tables move if the step were that much slower,
// e.g. the saturated runs' measured long-context step; docs/latency.md,
// "Issue 27, ninth pass").
var stepScaleProbe = 1.0

// scaledModel is m with every step's time multiplied by f.
func scaledModel(m latency.Model, f float64) latency.Model {
	return probed(m, func(_ *latency.Batch, t int64) int64 { return int64(float64(t)*f + 0.5) })
}

// probed is m with each step's time t replaced by adjust(b, t), keeping
// m's HostTimer visible through the wrapper.
func probed(m latency.Model, adjust func(b *latency.Batch, t int64) int64) latency.Model {
	p := probe{m, adjust}
	if h, ok := m.(latency.HostTimer); ok {
		return probeHost{p, h}
	}
	return p
}

type probe struct {
	latency.Model
	adjust func(b *latency.Batch, t int64) int64
}

func (p probe) StepTime(b *latency.Batch) int64 { return p.adjust(b, p.Model.StepTime(b)) }

type probeHost struct {
	probe
	h latency.HostTimer
}

func (p probeHost) HostStepUS(b *latency.Batch) int64 { return p.h.HostStepUS(b) }
func (p probeHost) HostTimed() bool                   { return p.h.HostTimed() }

// stackOf narrows auto to another stack's fits where a section measures
// that stack (Splitwise's steps); "" is vLLM, the engine simulated.
func stackOf(dep fit.Deployment) string {
	if dep.Engine == "splitwise" {
		return dep.Engine
	}
	return ""
}

// alpha0Override (µs), when >= 0, replaces the roofline's α0 in every
// section (-alpha0: how the tables move with the first-token path).
var alpha0Override = -1.0

// label names the model a mode resolved to: "roofline", or "fitted" for a
// coefficients file.
func label(mode string, r *resolve.Resolved) string {
	if r.Coeffs != nil {
		return "fitted"
	}
	return "roofline"
}

// inSample reports whether r's coefficients were fitted on the file whose
// SHA-256 is sha (then the error on it is a training error, not a test).
func inSample(r *resolve.Resolved, sha string) bool {
	if r.Coeffs == nil {
		return false
	}
	for _, s := range r.Coeffs.Sources {
		if s.SHA256 == sha {
			return true
		}
	}
	return false
}

func sha256File(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil))
}

// familyOf is the GPU architecture family, the granularity of the error
// table blis-report quotes.
func familyOf(gpu string) string {
	if g, ok := roofline.LookupGPU(gpu); ok {
		gpu = g.Name
	}
	return latency.GPUFamily(gpu)
}

// regimeOf classifies a closed-loop serving point by its concurrency.
func regimeOf(c int) string {
	switch {
	case c <= 4:
		return "closed loop, C ≤ 4"
	case c <= 32:
		return "closed loop, C 8–32"
	}
	return "closed loop, C ≥ 64"
}

// pool collects predicted/measured pairs by latency model, GPU family, load
// regime and statistic, for the pooled error table.
type pool struct{ m map[[4]string][]pair }

type pair struct{ pred, meas float64 }

// add records a pair; stat is normalised to TTFT, TPOT, E2E, throughput or
// capacity ("p50 TTFT" and "mean TTFT" are both TTFT: each source reports
// what it measured).
func (p *pool) add(model, family, regime, stat string, pred, meas float64) {
	if p.m == nil {
		p.m = map[[4]string][]pair{}
	}
	switch {
	case strings.HasSuffix(stat, "TTFT"), strings.HasSuffix(stat, "TPOT"), strings.HasSuffix(stat, "E2E"):
		if strings.HasPrefix(stat, "p90") {
			return // the p50 (or mean) stands for the run
		}
		stat = stat[strings.LastIndexByte(stat, ' ')+1:]
	case strings.HasPrefix(stat, "capacity"):
		stat = "capacity"
	default:
		return
	}
	k := [4]string{model, family, regime, stat}
	p.m[k] = append(p.m[k], pair{pred, meas})
}

// errStats are the median absolute percentage error and the median signed
// error (pred/meas − 1) of pairs, in %.
func errStats(ps []pair) (mdape, bias float64) {
	a := make([]float64, len(ps))
	b := make([]float64, len(ps))
	for i, p := range ps {
		a[i] = math.Abs(p.pred-p.meas) / p.meas * 100
		b[i] = (p.pred/p.meas - 1) * 100
	}
	return median(a), median(b)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	return (s[(n-1)/2] + s[n/2]) / 2
}

// pooledRow is one row of the model-error table.
type pooledRow struct {
	Model  string  `json:"latency_model"`
	Family string  `json:"gpu_family"`
	Regime string  `json:"load_regime"`
	N      int     `json:"points"`
	TTFT   float64 `json:"ttft_mdape_pct"`
	TTFTB  float64 `json:"ttft_bias_pct"`
	TPOT   float64 `json:"tpot_mdape_pct"`
	TPOTB  float64 `json:"tpot_bias_pct"`
	// Capacity (saturated replays only): completions per second while a
	// queue waited, simulated against real.
	CapN int      `json:"capacity_points,omitempty"`
	Cap  *float64 `json:"capacity_mdape_pct,omitempty"`
	CapB *float64 `json:"capacity_bias_pct,omitempty"`
}

func (p *pool) rows() []pooledRow {
	type key struct{ m, f, r string }
	seen := map[key]bool{}
	var keys []key
	for k := range p.m {
		kk := key{k[0], k[1], k[2]}
		if !seen[kk] {
			seen[kk] = true
			keys = append(keys, kk)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.m != b.m {
			return a.m > b.m // roofline before fitted
		}
		if a.f != b.f {
			return a.f < b.f
		}
		return a.r < b.r
	})
	var out []pooledRow
	for _, k := range keys {
		r := pooledRow{Model: k.m, Family: k.f, Regime: k.r}
		tt := p.m[[4]string{k.m, k.f, k.r, "TTFT"}]
		tp := p.m[[4]string{k.m, k.f, k.r, "TPOT"}]
		r.N = max(len(tt), len(tp))
		r.TTFT, r.TTFTB = errStats(tt)
		r.TPOT, r.TPOTB = errStats(tp)
		if cp := p.m[[4]string{k.m, k.f, k.r, "capacity"}]; len(cp) > 0 {
			md, b := errStats(cp)
			r.CapN, r.Cap, r.CapB = len(cp), &md, &b
		}
		out = append(out, r)
	}
	return out
}

func writePooled(w *strings.Builder, p *pool) {
	fmt.Fprintln(w, "#### Pooled: median absolute error (median signed error) by latency model, GPU family and load regime")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| latency model | GPU family | load regime | points | TTFT | TPOT | capacity |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|")
	for _, r := range p.rows() {
		c := "–"
		if r.Cap != nil {
			c = errCell(*r.Cap, *r.CapB)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %s |\n", r.Model, r.Family, r.Regime, r.N, errCell(r.TTFT, r.TTFTB), errCell(r.TPOT, r.TPOTB), c)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "TTFT and TPOT are the means of a closed-loop serving point and the medians of a replayed run; capacity is a saturated replay's completion rate while its queue waited. Points a fitted file was trained on are left out of its rows.")
	fmt.Fprintln(w)
}

func errCell(md, bias float64) string {
	if math.IsNaN(md) {
		return "–"
	}
	return fmt.Sprintf("%.0f%% (%+.0f%%)", md, bias)
}
