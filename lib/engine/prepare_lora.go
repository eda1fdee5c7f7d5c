package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/roofline"
)

// prepareLoRA sizes a deployment's adapters from the model's shapes, takes
// vLLM's adapter slots (max_loras of rank max_lora_rank over every module
// LoRA can target) out of the KV blocks when those come from GPU memory,
// and wraps the step model with the adapters' kernels (docs/latency.md,
// "LoRA").
func prepareLoRA(cfg *config.Cluster, i int, d *config.Deployment, res *resolve.Resolved, base latency.Model, kvFromMemory bool) (latency.Model, string, error) {
	l := d.LoRA
	key := func(k string) string { return cfg.DeploymentKey(i, "lora."+k) }
	if res == nil || res.Roofline == nil {
		r, err := resolve.Resolve(resolve.Spec{Mode: "roofline", Model: d.Model, GPU: d.GPU, TP: d.TP, WeightDtype: d.WeightDtype, KVDtype: d.KVDtype})
		if err != nil {
			return nil, "", errors.New(cfg.Where(cfg.DeploymentKey(i, "lora"), fmt.Sprintf("adapters need the model's shapes and the GPU's rates from the catalogues: %v", err)))
		}
		res = r
	}
	rf := res.Roofline
	a, g, tp := rf.A, rf.G, float64(rf.TP)
	dt := a.ActDtype.Bytes()
	dims := loraDims(a)
	perRank := func(rank int, mods []string) float64 {
		io := 0
		for _, m := range mods {
			io += dims[m]
		}
		return float64(rank) * float64(io) * float64(a.Layers) // parameters, all ranks
	}
	slot := perRank(l.MaxLoraRank, config.LoRAModules) * dt
	for j := range l.Adapters {
		ad := &l.Adapters[j]
		params := perRank(ad.Rank, l.Modules(ad))
		ad.FLOPs = int64(2 * params)
		ad.Bytes = int64(params * dt)
		if ad.SizeBytes > 0 {
			if float64(ad.SizeBytes) > slot {
				return nil, "", errors.New(cfg.Where(key(fmt.Sprintf("adapters[%d].size_bytes", j)), fmt.Sprintf("adapter %q of %d bytes is larger than a slot of rank max_lora_rank %d (%.0f bytes on %s)",
					ad.Name, ad.SizeBytes, l.MaxLoraRank, slot, a.Name)))
			}
			ad.Bytes = ad.SizeBytes
		}
	}
	if g.HostLinkGBps <= 0 {
		return nil, "", errors.New(cfg.Where(cfg.DeploymentKey(i, "gpu"), fmt.Sprintf("adapters load over the GPU's host link, and %s has no host_link_gb_s", g.Name)))
	}
	l.HostGBps = g.HostLinkGBps * tp
	l.StorageGBps = config.TierKinds["storage"].GBs
	why := fmt.Sprintf("; LoRA: %d adapters, max_loras %d of rank %d (%.1f MiB per slot), loads at %g GB/s", len(l.Adapters), l.MaxLoras, l.MaxLoraRank, slot/(1<<20), l.HostGBps)
	if kvFromMemory {
		per := kvBlockBytes(d, rf)
		take := int64(math.Ceil(float64(l.MaxLoras) * slot / tp / per))
		if d.Engine.KVBlocks-take < 1 {
			return nil, "", errors.New(cfg.Where(key("max_loras"), fmt.Sprintf("%d adapter slots of rank %d (%.2f GiB per GPU) leave no room for KV blocks next to %s on %s tp%d",
				l.MaxLoras, l.MaxLoraRank, float64(l.MaxLoras)*slot/tp/(1<<30), d.Model, d.GPU, d.TP)))
		}
		d.Engine.KVBlocks -= take
		why += fmt.Sprintf("; KV: %d blocks after the slots", d.Engine.KVBlocks)
	}
	m := &latency.LoRA{Base: base, FLOPsPerUS: g.BF16TFLOPS * 1e6 * g.Eff.GEMM * tp, BytesPerUS: g.HBMTBps * 1e6 * g.Eff.Memory * tp}
	return m, why, nil
}

// loraDims is in + out of each module LoRA can target, for a Llama-shaped
// layer (a MoE model's MLP modules at one expert's width).
func loraDims(a *roofline.Arch) map[string]int {
	hd := a.HeadDim
	if hd == 0 {
		hd = a.Hidden / a.Heads
	}
	inter := a.Intermediate
	if inter == 0 {
		inter = a.ExpertIntermediate
	}
	q, kv := a.Heads*hd, a.KVHeads*hd
	return map[string]int{"q_proj": a.Hidden + q, "k_proj": a.Hidden + kv, "v_proj": a.Hidden + kv, "o_proj": q + a.Hidden,
		"gate_proj": a.Hidden + inter, "up_proj": a.Hidden + inter, "down_proj": inter + a.Hidden}
}
