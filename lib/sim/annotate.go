package sim

import (
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// Describe lists the deployments of a prepared config (see Prepare) with the
// latency model each uses, for the results' metadata.
func Describe(cfg *config.Cluster, models []latency.Model) []trace.SimDeployment {
	deps := cfg.Resolved()
	out := make([]trace.SimDeployment, len(deps))
	for i, d := range deps {
		n, auto := 0, false
		for _, p := range d.Pools {
			n += p.Replicas
			auto = auto || p.Autoscaler != nil
		}
		out[i] = trace.SimDeployment{ID: d.ID, Model: d.Model, GPU: d.GPU, TP: d.TP, Replicas: n, KVBlocks: d.Engine.KVBlocks,
			Autoscaled: auto, GPUHourUSD: d.GPUHourUSD, SchedulingPolicy: d.Engine.SchedulingPolicy}
		for _, p := range d.Pools {
			if p.OwnHardware() {
				for k := range d.Pools {
					hw := d.ForPool(k)
					sp := trace.SimPool{Role: d.Pools[k].Role, GPU: hw.GPU, TP: hw.TP, Replicas: d.Pools[k].Replicas, GPUHourUSD: hw.GPUHourUSD}
					if g := hw.GPUsPerReplica(); g != hw.TP {
						sp.PP = g / hw.TP
					}
					out[i].Pools = append(out[i].Pools, sp)
				}
				break
			}
		}
		if g := d.GPUsPerReplica(); g != d.TP {
			out[i].PP = g / d.TP
		}
		if i < len(models) {
			out[i].Latency = models[i].Name()
		}
	}
	return out
}

// Annotate records on a results table's metadata what ran: the latency
// models (blis.sim.model, older and kept), the deployments (which the
// report's config table and the gpu_hours and cost_usd metrics read), the
// lower KV tiers that need results columns of their own, and the router.
func Annotate(md trace.Meta, cfg *config.Cluster, models []latency.Model) {
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name()
	}
	md.Set("blis.sim.model", strings.Join(names, ","))
	md.SetSimDeployments(Describe(cfg, models))
	md.SetKVTiers(cfg.TierNames())
	md.Set(trace.MetaSimRouter, cfg.Router.Routing)
	md.Set(trace.MetaSimKVEventDelay, strconv.FormatInt(cfg.KVEventDelay.US(), 10))
}

// AnnotatePolicy records a policy bundle in a table's metadata (nil: none).
func AnnotatePolicy(md trace.Meta, b *bundle.Bundle) {
	if b == nil {
		return
	}
	for _, kv := range b.Provenance() {
		md.Set(kv[0], kv[1])
	}
}
