package fit

import (
	"fmt"
	"github.com/blis-sim/blis/lib/measure"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

type outcomeSink struct{ out []Outcome }

func (s *outcomeSink) Write(r *trace.Result) error {
	s.out = append(s.out, Outcome{ID: r.ID, Output: r.OutputTokens, TTFTus: r.TTFTUS, E2Eus: r.E2EUS,
		Completed: r.Status == trace.StatusCompleted})
	return nil
}

// EngineRunner simulates requests on the cluster of cfg (the fitter uses one
// replica) with the engine blis-sim runs, so a fit matches what the
// simulator will do with the coefficients.
func EngineRunner(cfg config.Cluster) Runner {
	return func(m latency.Model, reqs []trace.Request) ([]Outcome, error) {
		sink := &outcomeSink{out: make([]Outcome, 0, len(reqs))}
		// The engine may reorder its input slice: give it a copy.
		in := append([]trace.Request(nil), reqs...)
		sum, err := engine.Run(cfg, []latency.Model{m}, engine.SliceSource(in), sink, engine.Options{Path: "calibration"})
		if err != nil {
			return nil, err
		}
		if sum.Completed < sum.Injected {
			return sink.out, fmt.Errorf("%d of %d requests did not complete in the simulation (dropped %d, rejected %d, unfinished %d): the engine config cannot hold them",
				sum.Injected-sum.Completed, sum.Injected, sum.Dropped, sum.Rejected, sum.Unfinished)
		}
		return sink.out, nil
	}
}

// SimulateServingPoint runs the closed loop of p (p.Concurrency chains of
// requests, each starting when the previous one finishes) through one
// replica of cfg with model, and returns the mean TTFT and mean TPOT, µs.
// Any latency model can be judged this way, fitted or roofline.
func SimulateServingPoint(model latency.Model, cfg config.Cluster, p measure.ServingPoint) (meanTTFTus, meanTPOTus float64, err error) {
	return SimulateServingPointN(model, cfg, p, ChainLength(p.Concurrency))
}

// SimulateServingPointN is SimulateServingPoint with perChain requests per client.
func SimulateServingPointN(model latency.Model, cfg config.Cluster, p measure.ServingPoint, perChain int) (meanTTFTus, meanTPOTus float64, err error) {
	cfg.Replicas = 1
	out, err := EngineRunner(cfg)(model, ClosedLoopRequests(p, perChain))
	if err != nil {
		return 0, 0, err
	}
	return MeanLatencies(out)
}
