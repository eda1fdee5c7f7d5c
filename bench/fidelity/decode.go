package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/blis-sim/blis/lib/latency"
)

// decodeBins are the batch sizes the decode-step table groups seconds by.
var decodeBins = []struct{ lo, hi int }{{1, 4}, {5, 20}, {21, 45}, {46, 87}, {88, 127}, {128, 1 << 30}}

// writeDecodeSteps reads a recorded run's pure-decode steps off vLLM's 1 Hz
// metrics and sets the roofline's step beside them. In a second without
// prompt tokens every running request gains one token a step, so the step
// is running / generated tokens per second; the requests' own times give
// the context they decode over at the middle of that second (each
// request's tokens spread evenly between its first and last). This
// separates the step's fixed part (batch 1) from its cost per running
// request, which open-loop TTFT and overload capacity hang on.
func writeDecodeSteps(w io.Writer, runs []*recordedRun) {
	fmt.Fprintln(w, "#### Decode steps by batch (seconds of vLLM's 1 Hz metrics without prompt tokens; roofline)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Real step = running requests / generated tokens per second; context = mean KV length of the requests decoding mid-second, from their recorded first and last token times (tokens spread evenly). Simulated: the run's own latency model for that batch and context. Medians per batch range.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| run | batch | seconds | context | real step | roofline step |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|")
	for _, r := range runs {
		if r.series == nil || r.setup == nil || r.setup.Resolved == nil {
			continue
		}
		m := latency.WithHost(r.setup.Resolved.Model, r.setup.Engine.Engine.AsyncScheduling)
		type sec struct{ real, sim, ctx float64 }
		bins := make([][]sec, len(decodeBins))
		for _, s := range r.series {
			if s.PromptTput != 0 || s.GenTput <= 0 || s.Running < 1 {
				continue
			}
			mid := (s.T - 0.5) * 1e6
			var sum float64
			n := 0
			for i := range r.reqs {
				q := &r.reqs[i]
				first := float64(q.ArrivalUS + q.RecordedTTFTUS)
				last := float64(q.ArrivalUS + q.RecordedE2EUS)
				if mid < first || mid >= last {
					continue
				}
				sum += float64(q.InputTokens) + (mid-first)/(last-first)*float64(q.OutputTokens)
				n++
			}
			if n == 0 {
				continue
			}
			ctx := sum / float64(n)
			b := latency.Batch{DecodeSeqs: s.Running, DecodeCtx: int64(ctx * float64(s.Running))}
			x := sec{real: float64(s.Running) / s.GenTput * 1e6, sim: float64(m.StepTime(&b)), ctx: ctx}
			for i, d := range decodeBins {
				if s.Running >= d.lo && s.Running <= d.hi {
					bins[i] = append(bins[i], x)
				}
			}
		}
		for i, d := range decodeBins {
			v := bins[i]
			if len(v) == 0 {
				continue
			}
			med := func(f func(sec) float64) float64 {
				xs := make([]float64, len(v))
				for j, x := range v {
					xs[j] = f(x)
				}
				sort.Float64s(xs)
				if len(xs)%2 == 1 {
					return xs[len(xs)/2]
				}
				return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
			}
			label := fmt.Sprintf("%d–%d", d.lo, d.hi)
			if d.hi > 1<<20 {
				label = fmt.Sprintf("%d+", d.lo)
			}
			real, sim := med(func(x sec) float64 { return x.real }), med(func(x sec) float64 { return x.sim })
			fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.1f ms | %.1f ms (%+.0f%%) |\n", r.name, label, len(v), med(func(x sec) float64 { return x.ctx }), real/1e3, sim/1e3, 100*(sim-real)/real)
		}
	}
	fmt.Fprintln(w)
}
