package main

// The only file of the harness that knows lib/engine's API (issue 11
// reshapes engine.Run and its config: follow it here and nowhere else).

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// simOut is one simulation: a result per request and a row per step.
type simOut struct {
	results []trace.Result
	steps   []trace.Step
}

type resultSink struct{ out *[]trace.Result }

func (s resultSink) Write(r *trace.Result) error { *s.out = append(*s.out, *r); return nil }

type stepSink struct{ out *[]trace.Step }

func (s stepSink) Write(st *trace.Step) error { *s.out = append(*s.out, *st); return nil }

// simulate replays reqs (arrival order, times relative to the first) on one
// replica of engine cfg with model m. With steps, every step is kept too
// (for the queue time series).
func simulate(cfg config.Cluster, m latency.Model, reqs []trace.Request, steps bool) (*simOut, error) {
	out := &simOut{results: make([]trace.Result, 0, len(reqs))}
	cfg.Replicas = 1
	opts := engine.Options{Path: "fidelity"}
	if steps {
		opts.Steps = stepSink{&out.steps}
	}
	in := append([]trace.Request(nil), reqs...) // the engine may reorder its input
	sum, err := engine.Run(cfg, []latency.Model{m}, engine.SliceSource(in), resultSink{&out.results}, opts)
	if err != nil {
		return nil, err
	}
	if sum.Completed < sum.Injected {
		return out, fmt.Errorf("%d of %d requests did not complete (dropped %d, unfinished %d)", sum.Injected-sum.Completed, sum.Injected, sum.Dropped, sum.Unfinished)
	}
	return out, nil
}

// runner adapts simulate to lib/fit's closed-loop serving targets.
func runner(cfg config.Cluster) fit.Runner {
	return func(m latency.Model, reqs []trace.Request) ([]fit.Outcome, error) {
		s, err := simulate(cfg, m, reqs, false)
		if err != nil {
			return nil, err
		}
		out := make([]fit.Outcome, len(s.results))
		for i, r := range s.results {
			out[i] = fit.Outcome{ID: r.ID, Output: r.OutputTokens, TTFTus: r.TTFTUS, E2Eus: r.E2EUS, Completed: r.Status == trace.StatusCompleted}
		}
		return out, nil
	}
}

// kvBlocks is the KV capacity of setup's replica, for KV-usage percentages.
func kvBlocks(setup *fit.Setup) int64 { return setup.Engine.Engine.KVBlocks }
