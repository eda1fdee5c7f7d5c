package fit

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/measure"
)

// EvalOptions say which latency model EvaluateServing judges and on which points.
type EvalOptions struct {
	Base         Deployment // engine limits and dtypes; model, GPU, TP come from each group
	Latency      string     // resolve mode: roofline, fitted or auto
	Coefficients string     // an explicit coefficients file (implies fitted)
	Holdout      float64    // > 0: only the points a fit with this holdout and Seed held out
	Seed         uint64
	PerChain     int // closed-loop requests per chain (0: ChainLength)
	Workers      int
	Progress     io.Writer // one line per group; nil: silent
}

// GroupEval is one deployment's points judged by a latency model.
type GroupEval struct {
	Group string
	Model string   // the latency model used (its Name)
	Why   string   // resolve's one-line reason
	Pairs [][]Pair // mean TTFT, mean TPOT
}

// EvaluateServing simulates every deployment group of pts with the latency
// model opt asks for, fitting nothing. A group that cannot be set up
// (model not catalogued, no coefficients) is reported in skipped.
func EvaluateServing(pts []measure.ServingPoint, st measure.ServingStats, opt EvalOptions) (groups []GroupEval, skipped []string, err error) {
	byGroup := map[string][]measure.ServingPoint{}
	for _, p := range pts {
		byGroup[p.Group()] = append(byGroup[p.Group()], p)
	}
	for _, g := range st.Groups() {
		gp := byGroup[g]
		if opt.Holdout > 0 {
			// The same seeded split a fit of this deployment alone makes.
			_, te := Split(len(gp), opt.Holdout, opt.Seed, "holdout")
			gp = Pick(gp, te)
			if len(gp) == 0 {
				skipped = append(skipped, fmt.Sprintf("%s: %d point(s), none held out", g, len(byGroup[g])))
				continue
			}
		}
		setup, err := ServingSetup(opt.Base, gp[0])
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s (%d points): %v", g, len(gp), err))
			continue
		}
		setup.PerChain = opt.PerChain
		spec := resolve.Spec{Mode: opt.Latency, Model: setup.Dep.Model, GPU: setup.Dep.GPU, TP: setup.Dep.TP,
			WeightDtype: setup.Dep.WeightDtype, CoefficientsFile: opt.Coefficients, Engine: setup.Dep.Engine, Version: setup.Dep.Version}
		r0, err := resolve.Resolve(spec)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s (%d points): %v", g, len(gp), err))
			continue
		}
		newModel := func() latency.Model {
			r, err := resolve.Resolve(spec)
			if err != nil {
				return r0.Model // cannot happen: the same spec resolved above
			}
			return r.Model
		}
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "evaluate: %s (%d points) with %s\n", g, len(gp), r0.Why)
		}
		pairs, err := EvalTargets(newModel, setup.ServingTargets(gp), opt.Workers)
		if err != nil {
			return nil, nil, err
		}
		groups = append(groups, GroupEval{Group: g, Model: r0.Model.Name(), Why: r0.Why, Pairs: pairs})
	}
	return groups, skipped, nil
}

// EvaluationReport summarises EvaluateServing's groups: one note per
// group, pooled test statistics and every point as a residual row.
func EvaluationReport(title string, groups []GroupEval, skipped []string) *Report {
	rep := &Report{Title: title, Warnings: append([]string(nil), skipped...)}
	var all [2][]Pair
	for _, g := range groups {
		gs := StatsOf(ServingStatNames, g.Pairs, 0)
		rep.Notes = append(rep.Notes, fmt.Sprintf("%-55s %3d points  TTFT MAPE %6.1f%% (median %5.1f%%, bias %+6.1f%%)  TPOT MAPE %6.1f%% (median %5.1f%%, bias %+6.1f%%)  [%s]",
			g.Group, gs[0].N, gs[0].MAPE, gs[0].MedAPE, gs[0].Bias, gs[1].MAPE, gs[1].MedAPE, gs[1].Bias, g.Model))
		for k := range g.Pairs {
			for i := range g.Pairs[k] {
				p := g.Pairs[k][i]
				p.Label = g.Group + " " + p.Label
				all[k] = append(all[k], p)
			}
		}
		rows := ResidualRows(g.Pairs)
		for i := range rows {
			rows[i].Label = g.Group + " " + rows[i].Label
		}
		rep.Residuals = append(rep.Residuals, rows...)
	}
	if len(all[0]) > 0 {
		rep.Test = StatsOf(ServingStatNames, all[:], 5)
	}
	return rep
}

// ServingStatNames are the statistics of a closed-loop serving point.
var ServingStatNames = []string{"mean TTFT", "mean TPOT"}

// ServingSetup is the setup of the deployment a serving point measured:
// base's engine limits and dtypes with the point's model, TP, engine and
// version; the point's GPU unless base names one; its precision as the
// weight dtype unless base gives one.
func ServingSetup(base Deployment, p measure.ServingPoint) (*Setup, error) {
	dep := base
	dep.Model, dep.TP, dep.Engine, dep.Version = p.Model, p.TP, p.Engine, p.Version
	if dep.GPU == "" {
		dep.GPU = p.GPU
	}
	if dep.WeightDtype == "" && p.Precision != "" {
		dep.WeightDtype = p.Precision
	}
	return NewSetup(dep)
}

// WithRun fills what a recorded run's engine configuration says into the
// deployment; values already set (flags) win. model, gpu and tp override the
// run's when non-empty (a run whose meta.json names no device needs gpu).
func (d Deployment) WithRun(rc measure.RunConfig, model, gpu string, tp int) (Deployment, error) {
	dep := d
	dep.Engine, dep.Version = firstNonEmpty(d.Engine, rc.Engine), firstNonEmpty(d.Version, rc.Version)
	dep.Model = firstNonEmpty(model, rc.Model)
	dep.GPU = firstNonEmpty(gpu, measure.DeviceGPU(rc.Device))
	if tp == 0 {
		tp = rc.TP
	}
	dep.TP = tp
	if dep.MaxNumSeqs == 0 {
		dep.MaxNumSeqs = rc.MaxNumSeqs
	}
	if dep.MaxNumBatchedTokens == 0 {
		dep.MaxNumBatchedTokens = rc.MaxNumBatchedTokens
	}
	if dep.KVBlocks == 0 {
		dep.KVBlocks = int64(rc.KVBlocks)
	}
	if dep.BlockSize == 0 {
		dep.BlockSize = rc.BlockSize
	}
	dep.PrefixCaching = dep.PrefixCaching || rc.PrefixCaching
	if dep.AsyncScheduling == "" && rc.AsyncScheduling != nil {
		dep.AsyncScheduling = map[bool]string{true: "on", false: "off"}[*rc.AsyncScheduling]
	}
	if dep.GPU == "" && rc.Device != "" {
		return dep, fmt.Errorf("field hardware.device_name: %q is not a catalogued GPU", rc.Device)
	}
	if dep.Model == "" {
		return dep, fmt.Errorf("the model is needed: neither given nor named by the run's engine config")
	}
	if dep.GPU == "" {
		return dep, fmt.Errorf("the GPU is needed: neither given nor named by the run's engine config")
	}
	return dep, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Pick returns v[idx[0]], v[idx[1]], ... (a split's rows).
func Pick[T any](v []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = v[j]
	}
	return out
}

// RelPath writes p relative to base when it lies under it (for source paths
// recorded in committed files); otherwise p unchanged.
func RelPath(base string) func(string) string {
	return func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		rel, err := filepath.Rel(base, abs)
		if err != nil {
			return p
		}
		return filepath.ToSlash(rel)
	}
}
