package report

import (
	"math"
	"strings"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

// KnownErrorSource names where KnownErrors come from: lib/latency embeds
// bench/fidelity's pooled table (make fidelity writes it with the docs'
// copy), so the report quotes exactly what the harness measured.
const KnownErrorSource = `docs/latency.md, "Fidelity" → "Pooled: median absolute error (median signed error) by latency model, GPU family and load regime" (go run ./bench/fidelity)`

// KnownError is a latency model's measured error against real runs for
// one GPU family and load regime: the median absolute error of TTFT and
// TPOT, with the median signed error (negative = the simulator is fast), in
// whole percent as the docs print them.
type KnownError struct {
	Latency   string // roofline or fitted
	GPUFamily string // Ampere, Ada, Hopper, Blackwell
	Regime    string
	Points    int
	TTFT      int
	TTFTBias  int
	TPOT      int
	TPOTBias  int
}

// KnownErrors is lib/latency's table rounded as the docs print it, in its order.
var KnownErrors = func() []KnownError {
	var out []KnownError
	r := func(v float64) int { return int(math.Round(v)) }
	for _, k := range latency.KnownErrors() {
		out = append(out, KnownError{k.Model, k.Family, k.Regime, k.Points, r(k.TTFT), r(k.TTFTBias), r(k.TPOT), r(k.TPOTBias)})
	}
	return out
}()

// LatencyKind is the kind of a latency model's name as blis-sim records it
// (roofline:..., fitted:..., linear): roofline, fitted, or the name itself.
func LatencyKind(name string) string {
	k, _, _ := strings.Cut(name, ":")
	return k
}

// GPUFamily is the architecture family of a GPU name, the granularity of
// KnownErrors ("" when the GPU is not in the catalogue, e.g. a YAML file).
func GPUFamily(gpu string) string {
	g, ok := roofline.LookupGPU(gpu)
	if !ok {
		return ""
	}
	return latency.GPUFamily(g.Name)
}

// KnownErrorsFor returns the measured errors of a latency model (its name
// as recorded) on a GPU, one per load regime; none when nothing was measured.
func KnownErrorsFor(latencyName, gpu string) []KnownError {
	kind, fam := LatencyKind(latencyName), GPUFamily(gpu)
	var out []KnownError
	for _, k := range KnownErrors {
		if k.Latency == kind && k.GPUFamily == fam {
			out = append(out, k)
		}
	}
	return out
}
