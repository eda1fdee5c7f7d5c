package report

import (
	"strings"

	"github.com/blis-sim/blis/lib/roofline"
)

// KnownErrorSource names where KnownErrors come from; TestKnownErrorsMatchDocs
// checks the table against it, so a regenerated docs/latency.md (make
// fidelity) is copied here, never guessed.
const KnownErrorSource = `docs/latency.md, "Fidelity" → "Pooled: median absolute error (median signed error) by latency model, GPU family and load regime" (go run ./bench/fidelity)`

// KnownError is a latency model's measured error against real runs for
// one GPU family and load regime: the median absolute error of TTFT and
// TPOT, with the median signed error (negative = the simulator is fast), in
// percent.
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

// KnownErrors is the table of KnownErrorSource, in its order.
var KnownErrors = []KnownError{
	{"roofline", "Ada", "saturated replay", 1, 9, 9, 8, 8},
	{"roofline", "Blackwell", "closed loop, C 8–32", 45, 18, -16, 12, 3},
	{"roofline", "Blackwell", "closed loop, C ≤ 4", 15, 48, -48, 17, 16},
	{"roofline", "Blackwell", "closed loop, C ≥ 64", 24, 27, -27, 12, 10},
	{"roofline", "Blackwell", "saturated replay", 1, 24, -24, 20, -20},
	{"roofline", "Hopper", "closed loop, C 8–32", 163, 36, 33, 5, -5},
	{"roofline", "Hopper", "closed loop, C ≤ 4", 36, 29, -10, 3, -1},
	{"roofline", "Hopper", "closed loop, C ≥ 64", 83, 33, 11, 12, -9},
	{"fitted", "Hopper", "closed loop, C 8–32", 23, 14, 13, 5, -2},
	{"fitted", "Hopper", "closed loop, C ≤ 4", 8, 31, -31, 11, 11},
	{"fitted", "Hopper", "closed loop, C ≥ 64", 21, 27, -5, 42, 41},
}

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
	switch g.Name {
	case "a100-80gb":
		return "Ampere"
	case "l40s", "rtx4090":
		return "Ada"
	case "h100", "h200":
		return "Hopper"
	case "b200", "gb200", "rtxpro6000":
		return "Blackwell"
	}
	return ""
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
