package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/trace"
)

// printSummary writes the one-screen run summary on stderr.
func printSummary(w io.Writer, s *engine.Summary, cfg *config.Cluster, wall time.Duration, drops *trace.ReasonTally) {
	sim := time.Duration(s.SimEndUS) * time.Microsecond
	fmt.Fprintf(w, "blis-sim: %d requests: %d completed, %d dropped, %d rejected, %d timed out, %d unfinished, %d source_failed\n",
		s.Injected, s.Completed, s.Dropped, s.Rejected, s.TimedOut, s.Unfinished, s.SourceFailed)
	if c := drops.Counts(trace.StatusDropped, trace.StatusRejected); len(c) > 0 {
		fmt.Fprintf(w, "  dropped and rejected, by reason (the drop_reason column; blis-report shows them too):\n")
		for _, r := range c {
			fmt.Fprintf(w, "    %8d %-8s %s (e.g. %s)\n", r.N, r.Status, r.Class, r.Example)
		}
	}
	deps := cfg.Resolved()
	if len(s.Deployments) == 1 {
		d, dc := s.Deployments[0], deps[0]
		fmt.Fprintf(w, "  %d replicas × %s on %s tp%d, router %s, %d KV blocks of %d tokens each\n",
			d.Replicas, dc.Model, dc.GPU, dc.TP, cfg.Router.Routing, d.KVBlocks, d.BlockSize)
	} else {
		fmt.Fprintf(w, "  %d deployments, router %s\n", len(s.Deployments), cfg.Router.Routing)
		for i, d := range s.Deployments {
			dc := deps[i]
			fmt.Fprintf(w, "    %s: %d replicas × %s on %s tp%d, %d KV blocks of %d tokens each\n",
				d.ID, d.Replicas, dc.Model, dc.GPU, dc.TP, d.KVBlocks, d.BlockSize)
		}
	}
	var busy int64
	for _, b := range s.BusyUS {
		busy += b
	}
	util := 0.0
	if s.SimEndUS > 0 && len(s.BusyUS) > 0 {
		util = float64(busy) / float64(s.SimEndUS) / float64(len(s.BusyUS))
	}
	if s.GPUHours != nil {
		// Replicas come and go: busy time over the replica-time paid for.
		replicaUS := 0.0
		for i, g := range s.GPUHours {
			replicaUS += g * 3.6e9 / float64(deps[i].TP)
		}
		util = float64(busy) / max(replicaUS, 1)
	}
	fmt.Fprintf(w, "  simulated %s in %s wall (%.0f× real time); %d events (%.1f M/s), %d steps, busy %.0f%%\n",
		sim.Round(time.Millisecond), wall.Round(time.Millisecond), sim.Seconds()/max(wall.Seconds(), 1e-9),
		s.Events, float64(s.Events)/max(wall.Seconds(), 1e-9)/1e6, s.Steps, 100*util)
	if s.GPUHours != nil && cfg.Autoscaled() {
		total, cost := 0.0, 0.0
		for i, g := range s.GPUHours {
			total += g
			cost += g * deps[i].GPUHourUSD
		}
		price := ""
		if cost > 0 {
			price = fmt.Sprintf(" ($%.2f)", cost)
		}
		fmt.Fprintf(w, "  autoscaling: %d scale-ups, %d scale-downs; %.3f GPU-hours%s; %d requests waited at the router (%.1f s in all), %d redirected, %d lost to drains\n",
			s.ScaleUps, s.ScaleDowns, total, price, s.HeldAtRouter, float64(s.HeldUS)/1e6, s.Redirected, s.DrainDropped)
	}
	fmt.Fprintf(w, "  %d preemptions, %d prefix-cached prompt tokens, %d cache blocks evicted; at most %d requests held in memory\n",
		s.Preemptions, s.CachedTokens, s.Evictions, s.PeakHeld)
	if s.TierOffloads[0]+s.TierOffloads[1]+s.TierLoads[0]+s.TierLoads[1] > 0 {
		fmt.Fprintf(w, "  KV tiers: %d blocks offloaded to cpu, %d to storage; %d reloaded from cpu, %d from storage; %d thrashing reloads\n",
			s.TierOffloads[0], s.TierOffloads[1], s.TierLoads[0], s.TierLoads[1], s.ThrashLoads)
	}
	if s.Transfers > 0 {
		fmt.Fprintf(w, "  P/D: %d KV transfers, %.3f GB; %d waited for the decode replica's blocks (backpressure)\n",
			s.Transfers, float64(s.TransferBytes)/1e9, s.PDBackpressure)
	}
}

// allDropped fails a run that served nothing because every request it could
// simulate was dropped or rejected: a configuration that can never serve
// this workload is bad input, not a result (the outputs are still written).
func allDropped(s *engine.Summary, drops *trace.ReasonTally) error {
	lost := s.Dropped + s.Rejected
	if s.Completed > 0 || lost == 0 || lost != s.Injected-s.SourceFailed {
		return nil
	}
	var why []string
	for _, r := range drops.Counts(trace.StatusDropped, trace.StatusRejected) {
		why = append(why, fmt.Sprintf("%d %s: %s (e.g. %s)", r.N, r.Status, r.Class, r.Example))
	}
	return cliutil.BadInput(fmt.Errorf("every request was dropped or rejected, none served: %s", strings.Join(why, "; ")))
}

// clientWaits counts the requests that waited for one of the client's
// in-flight slots (client_wait_us), for the summary.
type clientWaits struct {
	W            engine.Sink
	sent, waited int64
	sum, max     int64
}

func (c *clientWaits) Write(r *trace.Result) error {
	if r.ClientWaitUS != trace.Null {
		c.sent++
		if w := r.ClientWaitUS; w > 0 {
			c.waited++
			c.sum += w
			c.max = max(c.max, w)
		}
	}
	return c.W.Write(r)
}

func (c *clientWaits) print(w io.Writer, limit int) {
	if c.waited == 0 {
		fmt.Fprintf(w, "  client: at most %d requests in flight; none waited for a slot\n", limit)
		return
	}
	fmt.Fprintf(w, "  client: at most %d requests in flight; %d of %d waited for a slot (mean %s, max %s; client_wait_us)\n", limit, c.waited, c.sent,
		(time.Duration(c.sum/c.waited) * time.Microsecond).Round(time.Millisecond), (time.Duration(c.max) * time.Microsecond).Round(time.Millisecond))
}
