package config

import (
	"errors"
	"fmt"

	"github.com/blis-sim/blis/lib/roofline"
	"go.yaml.in/yaml/v3"
)

// Parallel is a deployment's parallelism besides tp (docs/latency.md,
// "Data, expert and pipeline parallelism"): vLLM's --data-parallel-size,
// --enable-expert-parallel, --pipeline-parallel-size, --all2all-backend
// and EPLB's redundant experts. Absent: TP only, as before.
type Parallel struct {
	// DP is the data-parallel size: each replica of the pool is one DP
	// rank (an engine with its own scheduler and KV cache, tp GPUs), and
	// dp consecutive replicas run their MoE layers together; every pool's
	// replicas must be a multiple of it.
	DP int `yaml:"dp"`
	// ExpertParallel spreads the routed experts, whole, over the dp × tp
	// GPUs (the EP degree) instead of sharding each by TP.
	ExpertParallel bool `yaml:"expert_parallel"`
	// PP is the pipeline-parallel size: a replica's layers in pp stages on
	// their own GPUs (a replica has tp × pp GPUs).
	PP int `yaml:"pp"`
	// All2AllBackend is the dispatch/combine backend of dp > 1 with EP:
	// allgather_reducescatter (vLLM's default), deepep_high_throughput,
	// deepep_low_latency.
	All2AllBackend string `yaml:"all2all_backend"`
	// RedundantExperts are EPLB's extra expert replicas: the EP degree
	// must divide experts + redundant_experts.
	RedundantExperts int `yaml:"redundant_experts"`
	// GPUsPerNode is the NVLink domain (8 in an HGX/DGX node, 72 in a
	// GB200 NVL72 rack): traffic to a GPU of another node goes over RDMA.
	GPUsPerNode int `yaml:"gpus_per_node"`
}

// DefaultParallel is what an empty parallel section means: TP only.
func DefaultParallel() Parallel {
	return Parallel{DP: 1, PP: 1, All2AllBackend: roofline.AllGatherReduceScatter, GPUsPerNode: 8}
}

// UnmarshalYAML fills absent keys with their defaults.
func (p *Parallel) UnmarshalYAML(n *yaml.Node) error {
	*p = DefaultParallel()
	type plain Parallel
	return n.Decode((*plain)(p))
}

// Roofline is the roofline's view of p.
func (p *Parallel) Roofline() roofline.Parallel {
	if p == nil {
		return roofline.Parallel{}
	}
	return roofline.Parallel{DP: p.DP, EP: p.ExpertParallel, PP: p.PP, All2All: p.All2AllBackend,
		RedundantExperts: p.RedundantExperts, GPUsPerNode: p.GPUsPerNode}
}

// GPUsPerReplica is tp × pp: the GPUs one replica (one DP rank) holds.
func (d *Deployment) GPUsPerReplica() int {
	if d.Parallel != nil && d.Parallel.PP > 1 {
		return d.TP * d.Parallel.PP
	}
	return d.TP
}

func (c *Cluster) validateParallel(i int, d *Deployment) error {
	p := d.Parallel
	if p == nil {
		return nil
	}
	key := func(k string) string { return c.DeploymentKey(i, "parallel."+k) }
	switch {
	case p.DP < 1:
		return errors.New(c.Where(key("dp"), fmt.Sprintf("expected >= 1, found %d", p.DP)))
	case p.PP < 1:
		return errors.New(c.Where(key("pp"), fmt.Sprintf("expected >= 1, found %d", p.PP)))
	case p.RedundantExperts < 0:
		return errors.New(c.Where(key("redundant_experts"), fmt.Sprintf("expected >= 0, found %d", p.RedundantExperts)))
	case p.RedundantExperts > 0 && !p.ExpertParallel:
		return errors.New(c.Where(key("redundant_experts"), "EPLB's redundant experts need expert_parallel: true"))
	case p.GPUsPerNode < 1:
		return errors.New(c.Where(key("gpus_per_node"), fmt.Sprintf("expected >= 1, found %d", p.GPUsPerNode)))
	}
	if err := oneOf(c, key("all2all_backend"), p.All2AllBackend, roofline.All2AllBackends); err != nil {
		return err
	}
	for j, pool := range d.Pools {
		pk := fmt.Sprintf("deployments[%d].pools[%d].", i, j)
		if c.IsFlat() {
			pk = ""
		}
		if p.DP > 1 && pool.Autoscaler != nil {
			return errors.New(c.Where(pk+"autoscaler", fmt.Sprintf("a pool of dp %d ranks cannot be autoscaled (a DP group scales as a whole; not modelled)", p.DP)))
		}
		if p.DP > 1 && pool.Replicas%p.DP != 0 {
			return errors.New(c.Where(pk+"replicas", fmt.Sprintf("each replica is one DP rank: expected a multiple of parallel.dp (%d), found %d", p.DP, pool.Replicas)))
		}
	}
	return nil
}
