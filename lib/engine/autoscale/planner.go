package autoscale

import (
	"fmt"
	"math"
)

// Perf is a pool's engine as a performance model, the simulator's
// counterpart of the pre-deployment profile NVIDIA Dynamo's SLA planner
// interpolates: computed from the pool's own latency model and engine
// limits.
type Perf interface {
	// PrefillUS is the time one replica takes to prefill a prompt of n
	// tokens alone (its chunks back to back): the profile's TTFT at ISL n.
	PrefillUS(n float64) float64
	// DecodeStepUS is one decode step of batch sequences holding ctx
	// tokens of context each: the profile's ITL.
	DecodeStepUS(batch int, ctx float64) float64
	// MaxBatch is the most sequences of ctx tokens one replica decodes at
	// once (its max_num_seqs and its KV capacity).
	MaxBatch(ctx float64) int
}

// Planner sizes a prefill or a decode pool as NVIDIA Dynamo's SLA planner
// does (components/planner, planner_core.py: _compute_replica_requirements),
// with the window's observations as the load prediction (its constant
// predictor) and the pool's Perf as the profile:
//
// prefill: with isl the mean prompt of the window's arrivals, TTFT₀ =
// PrefillUS(isl) and the correction c = observed mean TTFT / TTFT₀,
//
//	replicas = ⌈rate × isl × min(1, c) / (isl / TTFT₀)⌉
//
// decode: with osl the mean output, ctx = isl + osl/2, the correction c =
// observed mean ITL / DecodeStepUS(concurrency per replica, ctx) (Little's
// law: rate × mean duration / replicas), the corrected target ITL′ =
// ITL / c and b the largest batch with DecodeStepUS(b, ctx) ≤ ITL′,
//
//	replicas = ⌈rate × osl / (b / DecodeStepUS(b, ctx))⌉
//
// A pool with no arrivals in the window keeps its size (Dynamo skips an
// interval without traffic), and at zero replicas with requests pending it
// asks for one.
type Planner struct {
	ITLUS float64 // the decode pool's ITL target (slo.itl), µs
}

func (pl *Planner) Recommend(p *PoolView, _ []PoolView) Recommendation {
	m := &p.Metrics
	if p.Current == 0 && p.Pending > 0 && m.RequestRate == 0 {
		return Recommendation{1, fmt.Sprintf("planner: %d pending at 0 replicas", p.Pending)}
	}
	if m.RequestRate == 0 || m.InputTokensMean == 0 || p.Perf == nil {
		return Recommendation{p.Current, "planner: no request arrived in the window"}
	}
	switch p.Role {
	case "prefill":
		return pl.prefill(p)
	case "decode":
		return pl.decode(p)
	}
	return Recommendation{p.Current, fmt.Sprintf("planner: sizes prefill and decode pools, not %s", p.Role)}
}

func (pl *Planner) prefill(p *PoolView) Recommendation {
	m := &p.Metrics
	isl := m.InputTokensMean
	t0 := p.Perf.PrefillUS(isl)
	corr := 1.0
	if m.TTFTMeanUS > 0 && t0 > 0 {
		corr = m.TTFTMeanUS / t0
	}
	need := m.RequestRate * isl * min(1, corr) // prompt tokens per second
	capacity := isl / (t0 / 1e6)               // per replica
	d := int(math.Ceil(need / capacity))
	c := "no TTFT observed: c = 1"
	if m.TTFTMeanUS > 0 {
		c = fmt.Sprintf("c = TTFT %.0f µs / %.0f µs = %.3g", m.TTFTMeanUS, t0, corr)
	}
	return Recommendation{d, fmt.Sprintf("planner: prefill ⌈%.4g req/s × %.0f tokens × min(1, c) / %.0f tokens/s per replica⌉ = %d (%s)",
		m.RequestRate, isl, capacity, d, c)}
}

func (pl *Planner) decode(p *PoolView) Recommendation {
	m := &p.Metrics
	osl := max(m.OutputTokensMean, 1)
	ctx := m.InputTokensMean + osl/2
	itl := pl.ITLUS
	corr, exp := 1.0, 0.0
	if m.ITLMeanUS > 0 && m.DurationMeanUS > 0 && p.Ready > 0 {
		conc := max(1, int(math.Round(m.RequestRate*m.DurationMeanUS/1e6/float64(p.Ready))))
		if exp = p.Perf.DecodeStepUS(conc, ctx); exp > 0 {
			corr = m.ITLMeanUS / exp
		}
	}
	if corr > 0 {
		itl /= corr
	}
	// The largest batch within the corrected ITL (step time grows with
	// the batch): a binary search.
	lo, hi := 1, max(1, p.Perf.MaxBatch(ctx))
	if p.Perf.DecodeStepUS(lo, ctx) > itl {
		hi = lo
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if p.Perf.DecodeStepUS(mid, ctx) <= itl {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	step := p.Perf.DecodeStepUS(lo, ctx)
	capacity := float64(lo) / (step / 1e6) // output tokens per second per replica
	d := int(math.Ceil(m.RequestRate * osl / capacity))
	c := "no ITL observed: c = 1"
	if exp > 0 {
		c = fmt.Sprintf("c = ITL %.0f µs / expected %.0f µs = %.3g", m.ITLMeanUS, exp, corr)
	}
	return Recommendation{d, fmt.Sprintf("planner: decode ⌈%.4g req/s × %.0f tokens / (%d seqs / %.0f µs at ctx %.0f, within ITL %.0f µs / c)⌉ = %d (%s)",
		m.RequestRate, osl, lo, step, ctx, pl.ITLUS, d, c)}
}
