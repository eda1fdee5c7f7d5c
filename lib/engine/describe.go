package engine

import (
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
		n := 0
		for _, p := range d.Pools {
			n += p.Replicas
		}
		out[i] = trace.SimDeployment{ID: d.ID, Model: d.Model, GPU: d.GPU, TP: d.TP, Replicas: n, KVBlocks: d.Engine.KVBlocks}
		if i < len(models) {
			out[i].Latency = models[i].Name()
		}
	}
	return out
}
