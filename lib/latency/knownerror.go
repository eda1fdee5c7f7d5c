package latency

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// KnownErr is one row of bench/fidelity's pooled error table: how far a
// latency model was from the real runs in ../shared (vLLM only) on one GPU
// family in one load regime. Errors are in %: the median absolute error and
// the median signed error (+ = the simulator is slow). Points a coefficients
// file was fitted on are left out of its rows.
type KnownErr struct {
	Model    string  `json:"latency_model"` // "roofline" or "fitted"
	Family   string  `json:"gpu_family"`    // GPUFamily
	Regime   string  `json:"load_regime"`   // "closed loop, C ≤ 4", "closed loop, C 8–32", "closed loop, C ≥ 64", "saturated replay"
	Points   int     `json:"points"`
	TTFT     float64 `json:"ttft_mdape_pct"`
	TTFTBias float64 `json:"ttft_bias_pct"`
	TPOT     float64 `json:"tpot_mdape_pct"`
	TPOTBias float64 `json:"tpot_bias_pct"`
	// Capacity (saturated replays only): the completion rate while a queue
	// waited; nil where the regime has none.
	CapacityPoints int      `json:"capacity_points,omitempty"`
	Capacity       *float64 `json:"capacity_mdape_pct,omitempty"`
	CapacityBias   *float64 `json:"capacity_bias_pct,omitempty"`
}

// knownErrorJSON is `go run ./bench/fidelity -json lib/latency/knownerror.json`
// (make fidelity regenerates it with the docs tables).
//
//go:embed knownerror.json
var knownErrorJSON []byte

var knownErrs = sync.OnceValues(func() ([]KnownErr, error) {
	var rows []KnownErr
	if err := json.Unmarshal(knownErrorJSON, &rows); err != nil {
		return nil, fmt.Errorf("lib/latency/knownerror.json: %w", err)
	}
	return rows, nil
})

// KnownErrors is the whole table, in bench/fidelity's order (empty if the
// embedded file did not parse, which TestKnownErrorTable catches).
func KnownErrors() []KnownErr {
	rows, _ := knownErrs()
	return rows
}

// KnownError is the measured error of model ("roofline" or "fitted") on a
// GPU family in a load regime; ok is false when bench/fidelity has no such
// points.
func KnownError(model, family, regime string) (e KnownErr, ok bool) {
	for _, r := range KnownErrors() {
		if r.Model == model && r.Family == family && r.Regime == regime {
			return r, true
		}
	}
	return KnownErr{}, false
}

// GPUFamily is the architecture family of a catalogued GPU name (the
// roofline catalogue's canonical names), the granularity of the known-error
// table; other names come back lower-cased.
func GPUFamily(gpu string) string {
	switch n := strings.ToLower(gpu); n {
	case "a100-80gb":
		return "Ampere"
	case "l40s", "rtx4090":
		return "Ada"
	case "h100", "h200":
		return "Hopper"
	case "b200", "gb200", "rtxpro6000":
		return "Blackwell"
	default:
		return n
	}
}

// DescribeKnownError is one clause for blis-sim's stderr: model's measured
// TTFT and TPOT error on family, per load regime, or that there is none.
func DescribeKnownError(model, family string) string {
	var rows []KnownErr
	for _, r := range KnownErrors() {
		if r.Model == model && r.Family == family {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return fmt.Sprintf("no measured error for the %s model on %s GPUs in bench/fidelity", model, family)
	}
	sort.SliceStable(rows, func(i, j int) bool { return regimeRank(rows[i].Regime) < regimeRank(rows[j].Regime) })
	parts := make([]string, len(rows))
	for i, r := range rows {
		c := ""
		if r.Capacity != nil && r.CapacityBias != nil {
			c = ", capacity " + pct(*r.Capacity, *r.CapacityBias)
		}
		parts[i] = fmt.Sprintf("%s: TTFT %s, TPOT %s%s, %d %s", r.Regime, pct(r.TTFT, r.TTFTBias), pct(r.TPOT, r.TPOTBias), c, r.Points, map[bool]string{true: "point", false: "points"}[r.Points == 1])
	}
	return fmt.Sprintf("known %s error on %s GPUs (bench/fidelity against real vLLM runs; median absolute error, signed in brackets, + = simulator slow): %s", model, family, strings.Join(parts, "; "))
}

func pct(abs, signed float64) string {
	if math.IsNaN(abs) {
		return "–"
	}
	return fmt.Sprintf("%.0f%% (%+.0f%%)", abs, signed)
}

func regimeRank(r string) int {
	switch {
	case strings.Contains(r, "≤ 4"):
		return 0
	case strings.Contains(r, "8–32"):
		return 1
	case strings.Contains(r, "≥ 64"):
		return 2
	}
	return 3
}
