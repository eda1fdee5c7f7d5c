package sim

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/trace"
)

// WriteSummary writes blis-sim's one-screen summary of the run. router is
// what routed the requests, from the results' metadata
// (trace.Meta.RouterLabel: a policy bundle's routing stage when it has
// one), as blis-report shows it.
func (o *Outcome) WriteSummary(w io.Writer, setup *Setup, router string, wall time.Duration) {
	s, cfg, drops := &o.Summary, &setup.Cfg, &o.Drops
	sim := time.Duration(s.SimEndUS) * time.Microsecond
	fmt.Fprintf(w, "blis-sim: %d requests: %d completed, %d dropped, %d rejected, %d timed out, %d unfinished, %d source_failed\n",
		s.Injected, s.Completed, s.Dropped, s.Rejected, s.TimedOut, s.Unfinished, s.SourceFailed)
	if c := drops.Counts(lostStatuses...); len(c) > 0 {
		fmt.Fprintf(w, "  dropped, rejected and timed out, by reason (the drop_reason column; blis-report shows them too):\n")
		trace.WriteReasons(w, "    ", c, maxReasons)
	}
	deps := cfg.Resolved()
	if len(s.Deployments) == 1 {
		d, dc := s.Deployments[0], deps[0]
		fmt.Fprintf(w, "  %s × %s %s, router %s, %d KV blocks of %d tokens each\n",
			count(d.Replicas, "replica"), dc.Model, onHardware(&dc), router, d.KVBlocks, d.BlockSize)
	} else {
		fmt.Fprintf(w, "  %d deployments, router %s\n", len(s.Deployments), router)
		for i, d := range s.Deployments {
			dc := deps[i]
			fmt.Fprintf(w, "    %s: %s × %s %s, %d KV blocks of %d tokens each\n",
				d.ID, count(d.Replicas, "replica"), dc.Model, onHardware(&dc), d.KVBlocks, d.BlockSize)
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
			replicaUS += g * 3.6e9 / float64(deps[i].GPUsPerReplica())
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
	if s.LoRALoads > 0 {
		fmt.Fprintf(w, "  LoRA: %d adapter loads into GPU slots\n", s.LoRALoads)
	}
	if tiers := tierSummary(s); tiers != "" {
		fmt.Fprintf(w, "  KV tiers: %s; %d thrashing reloads\n", tiers, s.ThrashLoads)
	}
	if cfg.Router.FlowControl != nil {
		mean := 0.0
		if s.GatewayQueued > 0 {
			mean = float64(s.GatewayWaitUS) / float64(s.GatewayQueued) / 1e3
		}
		fmt.Fprintf(w, "  flow control: %d requests waited at the gateway (mean %.1f ms); %d rejected by a full queue or band, %d shed, %d at the TTL\n",
			s.GatewayQueued, mean, s.GatewayFull, s.GatewayShed, s.GatewayExpired)
	}
	if s.RouteHolds > 0 {
		fmt.Fprintf(w, "  routing holds: %d requests held at the router by the routing policy (%d holds; %.1f ms held on average)\n",
			s.RouteHeld, s.RouteHolds, float64(s.RouteHeldUS)/float64(s.RouteHeld)/1e3)
	}
	if s.Transfers > 0 {
		fmt.Fprintf(w, "  P/D: %d KV transfers, %.3f GB; %d waited for the decode replica's blocks (backpressure)\n",
			s.Transfers, float64(s.TransferBytes)/1e9, s.PDBackpressure)
	}
	if s.Encodes > 0 {
		fmt.Fprintf(w, "  E/P/D: %d requests encoded on the encode pool, %.3f GB of embeddings; %.1f ms mean from encode routing to the embeddings' arrival\n",
			s.Encodes, float64(s.EncodeBytes)/1e9, float64(s.EncodeUS)/float64(s.Encodes)/1e3)
	}
}

// tierSummary is "N blocks offloaded to cpu, M to storage; K reloaded
// from cpu, L from storage" (and the run's other tiers that saw traffic),
// or "" when no block moved.
func tierSummary(s *engine.Summary) string {
	var total int64
	for i := range s.TierNames {
		total += s.TierOffloads[i] + s.TierLoads[i]
	}
	if total == 0 {
		return ""
	}
	var off, load strings.Builder
	for i, n := range s.TierNames {
		switch {
		case i == 0:
			fmt.Fprintf(&off, "%d blocks offloaded to %s", s.TierOffloads[i], n)
			fmt.Fprintf(&load, "%d reloaded from %s", s.TierLoads[i], n)
		case i < len(trace.FixedTiers) || s.TierOffloads[i]+s.TierLoads[i] > 0:
			fmt.Fprintf(&off, ", %d to %s", s.TierOffloads[i], n)
			fmt.Fprintf(&load, ", %d from %s", s.TierLoads[i], n)
		}
	}
	return off.String() + "; " + load.String()
}

// lostStatuses are the statuses of requests that were not served, in the
// order summaries list them; maxReasons bounds the kinds listed (the rest
// are counted on one line).
var lostStatuses = []string{trace.StatusDropped, trace.StatusRejected, trace.StatusTimedOut}

const maxReasons = 12

// ServedNothing fails a run that served nothing because every request it
// could simulate was dropped, rejected or timed out: a configuration that
// can never serve this workload is bad input (exit status 2), not a result
// (the outputs are still written).
func (o *Outcome) ServedNothing() error {
	s, drops := &o.Summary, &o.Drops
	if !s.ServedNothing() {
		return nil
	}
	var why []string
	for i, r := range drops.Counts(lostStatuses...) {
		if i == maxReasons {
			why = append(why, "…")
			break
		}
		why = append(why, fmt.Sprintf("%d %s: %s (e.g. %s)", r.N, r.Status, r.Class, r.Example))
	}
	return badinput.Wrap(fmt.Errorf("every request was dropped, rejected or timed out, none served: %s", strings.Join(why, "; ")))
}

// count is "1 replica", "2 replicas".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ClientWaits counts the requests that waited for one of the client's
// in-flight slots (client_wait_us), for the summary.
type ClientWaits struct {
	W            engine.Sink
	Limit        int
	sent, waited int64
	sum, max     int64
}

func (c *ClientWaits) Write(r *row.Result) error {
	if r.ClientWaitUS != row.Null {
		c.sent++
		if w := r.ClientWaitUS; w > 0 {
			c.waited++
			c.sum += w
			c.max = max(c.max, w)
		}
	}
	return c.W.Write(r)
}

// WriteSummary is the summary's client line.
func (c *ClientWaits) WriteSummary(w io.Writer) {
	if c.waited == 0 {
		fmt.Fprintf(w, "  client: at most %d requests in flight; none waited for a slot\n", c.Limit)
		return
	}
	fmt.Fprintf(w, "  client: at most %d requests in flight; %d of %d waited for a slot (mean %s, max %s; client_wait_us)\n", c.Limit, c.waited, c.sent,
		(time.Duration(c.sum/c.waited) * time.Microsecond).Round(time.Millisecond), (time.Duration(c.max) * time.Microsecond).Round(time.Millisecond))
}

// onHardware is "on GPU tpN" for deployment d, naming the pools that run
// on hardware of their own (heterogeneous P/D) after it.
func onHardware(d *config.Deployment) string {
	s := fmt.Sprintf("on %s tp%d", d.GPU, d.TP)
	var own []string
	for j, p := range d.Pools {
		if p.OwnHardware() {
			hw := d.ForPool(j)
			own = append(own, fmt.Sprintf("%s pool on %s tp%d", p.Role, hw.GPU, hw.TP))
		}
	}
	if len(own) > 0 {
		s += " (" + strings.Join(own, "; ") + ")"
	}
	return s
}
