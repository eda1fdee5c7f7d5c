package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/roofline"
)

// Prepare picks the latency model each deployment asks for and fills its
// engine.kv_blocks when 0 (KV capacity from GPU memory ×
// gpu_memory_utilization minus weights, over the model's KV bytes per
// token). It returns the models in config.Cluster.Resolved order, then one
// for each pool with hardware of its own (config.Cluster.OwnPools order:
// heterogeneous P/D), and one line per model for stderr. A latency.beta in
// the config is used as a linear model; KV capacity then still comes from
// the catalogues unless kv_blocks is set. Errors name the file, line and
// key.
func Prepare(cfg *config.Cluster) (models []latency.Model, why []string, err error) {
	deps := cfg.Resolved()
	var poolModels []latency.Model
	var poolWhy []string
	for i := range deps {
		d := &deps[i]
		// The model's KV layout first: the KV sizing of every pool reads it.
		d.Engine.KVLayout = kvLayout(d.Model)
		if cfg.IsFlat() {
			cfg.Engine.KVLayout = d.Engine.KVLayout
		} else {
			cfg.Deployments[i].Engine.KVLayout = d.Engine.KVLayout
		}
		// A pool's own hardware first: a pool that inherits the
		// deployment's engine must not inherit a kv_blocks computed for
		// the deployment's GPU.
		for j := range d.Pools {
			if !d.Pools[j].OwnHardware() {
				continue
			}
			m, w, err := preparePool(cfg, i, j)
			if err != nil {
				return nil, nil, err
			}
			poolModels = append(poolModels, m)
			poolWhy = append(poolWhy, fmt.Sprintf("%s pool %d (%s): %s", d.ID, j, d.Pools[j].Role, w))
		}
		m, w, err := prepare(cfg, i, d)
		if err != nil {
			return nil, nil, err
		}
		if cfg.IsFlat() {
			cfg.Engine.KVBlocks = d.Engine.KVBlocks
		} else {
			cfg.Deployments[i].Engine.KVBlocks = d.Engine.KVBlocks
			cfg.Deployments[i].KV, cfg.Deployments[i].KVTransfer = d.KV, d.KVTransfer
		}
		models = append(models, m)
		if len(deps) > 1 {
			w = d.ID + ": " + w
		}
		why = append(why, w)
	}
	return append(models, poolModels...), append(why, poolWhy...), nil
}

func prepare(cfg *config.Cluster, i int, d *config.Deployment) (latency.Model, string, error) {
	key := func(k string) string { return cfg.DeploymentKey(i, k) }
	kvFromMemory := d.Engine.KVBlocks == 0
	model, why, res, err := resolveModel(cfg, d, key, needsCatalogue(d))
	if err != nil {
		return nil, "", err
	}
	if d.Speculative != nil {
		m, w, err := prepareSpec(cfg, i, d, res, model, kvFromMemory)
		if err != nil {
			return nil, "", err
		}
		model, why = m, why+w
	}
	if d.LoRA != nil {
		m, w, err := prepareLoRA(cfg, i, d, res, model, kvFromMemory)
		if err != nil {
			return nil, "", err
		}
		model, why = m, why+w
	}
	if err := prepareKV(cfg, i, d, res); err != nil {
		return nil, "", err
	}
	if err := prepareLinks(cfg, i, d, res); err != nil {
		return nil, "", err
	}
	return model, why, nil
}

// preparePool resolves the latency model and KV blocks of pool j of
// deployment i, which has hardware of its own; errors name the pool's
// keys. The pool's engine gets its computed kv_blocks.
func preparePool(cfg *config.Cluster, i, j int) (latency.Model, string, error) {
	d := &cfg.Deployments[i]
	d.Pools = slices.Clone(d.Pools) // the caller's config keeps its pools
	p := &d.Pools[j]
	key := func(k string) string {
		own := strings.HasPrefix(k, "gpu") && p.GPU != "" || k == "tp" && p.TP != 0 ||
			strings.HasPrefix(k, "engine") && p.Engine != nil || strings.HasPrefix(k, "latency") && p.Latency != nil
		if own {
			return fmt.Sprintf("deployments[%d].pools[%d].%s", i, j, k)
		}
		return cfg.DeploymentKey(i, k)
	}
	if d.LoRA != nil {
		// Its adapters' memory and cost would be the pool's own: not modelled.
		return nil, "", errors.New(cfg.Where(cfg.DeploymentKey(i, "lora"), fmt.Sprintf("LoRA adapters with a pool on hardware of its own (pools[%d]) are not modelled: drop the pool's gpu, tp, engine and latency keys, or lora", j)))
	}
	if d.Speculative != nil {
		// Its draft's cost and KV would be the pool's own: not modelled.
		return nil, "", errors.New(cfg.Where(cfg.DeploymentKey(i, "speculative"), fmt.Sprintf("speculative decoding with a pool on hardware of its own (pools[%d]) is not modelled: drop the pool's gpu, tp, engine and latency keys, or speculative", j)))
	}
	if p.GPU != "" {
		// Checked even when the pool's model needs no catalogue (a linear
		// model with kv_blocks): a typo must not pass.
		if _, err := roofline.LoadGPU(p.GPU); err != nil {
			return nil, "", errors.New(cfg.Where(key("gpu"), err.Error()))
		}
	}
	x := d.ForPool(j)
	model, why, _, err := resolveModel(cfg, &x, key, false)
	if err != nil {
		return nil, "", err
	}
	e := x.Engine
	p.Engine = &e
	return model, why, nil
}

// resolveModel picks d's latency model (d: a deployment, or a pool's view
// of it) and fills d.Engine.KVBlocks when 0 and its pools' weight-load
// bytes; catalogue asks for the catalogue's view of the hardware even when
// the model needs none (res is then returned).
func resolveModel(cfg *config.Cluster, d *config.Deployment, key func(string) string, catalogue bool) (latency.Model, string, *resolve.Resolved, error) {
	lin, isLinear := linearModel(&d.Latency)
	var res *resolve.Resolved
	if !isLinear || d.Engine.KVBlocks == 0 || catalogue {
		mode := d.Latency.Mode
		if mode == "linear" {
			mode = "auto"
		}
		var err error
		res, err = resolve.Resolve(resolve.Spec{Mode: mode, Model: d.Model, GPU: d.GPU, TP: d.TP,
			WeightDtype: d.WeightDtype, KVDtype: d.KVDtype, CoefficientsFile: d.Latency.Coefficients})
		if err != nil {
			return nil, "", nil, resolveErr(cfg, key, err)
		}
		if err := prepareParallel(cfg, key, d, res); err != nil {
			return nil, "", nil, err
		}
	}
	var model latency.Model
	var why string
	if isLinear {
		model = lin
		why = fmt.Sprintf("latency: linear model from config (β=%v, α=%v)", d.Latency.Beta, d.Latency.Alpha)
	} else {
		model, why = res.Model, res.Why
		if a, ok := configAlpha(&d.Latency); ok {
			// The API server's share of the first-token path, as the
			// deployment measured it, in place of the model's own α.
			model = latency.WithAlpha(model, a)
			why += fmt.Sprintf("; α from config: %g µs + %g µs/input token before queueing, %g µs per streamed token", a.QueueBase, a.QueuePerInputToken, a.PerOutputToken)
		}
	}
	if needsWeightBytes(d) {
		if res == nil {
			var err error
			res, err = resolve.Resolve(resolve.Spec{Mode: "roofline", Model: d.Model, GPU: d.GPU, TP: d.TP,
				WeightDtype: d.WeightDtype, KVDtype: d.KVDtype})
			if err != nil {
				return nil, "", nil, errors.New(cfg.Where(key("pools"), fmt.Sprintf("autoscaler.weight_load: the model's weight bytes are unknown (%v): set weight_load.time or weight_load.bytes", err)))
			}
		}
		if res.Roofline == nil {
			return nil, "", nil, errors.New(cfg.Where(key("pools"), "autoscaler.weight_load: the model's weight bytes are unknown: set weight_load.time or weight_load.bytes"))
		}
		b := res.Roofline.WeightBytesPerRank() * float64(res.Roofline.GPUs())
		for _, p := range d.Pools {
			// A pool with hardware of its own was filled first, by its own
			// view (preparePool); a deployment's view skips none left.
			if a := p.Autoscaler; a != nil && a.WeightLoad.Time == 0 && a.WeightLoad.Bytes == 0 {
				a.WeightLoad.Bytes = b
			}
		}
	}
	if d.Engine.KVBlocks == 0 {
		blocks, reserve, err := KVBlocksFromMemory(d, res)
		if err != nil {
			return nil, "", nil, errors.New(cfg.Where(key("gpu"), err.Error()))
		}
		d.Engine.KVBlocks = blocks
		if d.Engine.KVBlocks < 1 {
			return nil, "", nil, errors.New(cfg.Where(key("engine.kv_blocks"), fmt.Sprintf("%s on %s tp%d holds less than one KV block of %d tokens", d.Model, d.GPU, d.TP, d.Engine.BlockSize)))
		}
		if d.Engine.KVBlocks > 1<<31-1 {
			d.Engine.KVBlocks = 1<<31 - 1
		}
		why += fmt.Sprintf("; KV: %d blocks of %d tokens per replica (gpu_memory_utilization %g, reserve %s per GPU)", d.Engine.KVBlocks, d.Engine.BlockSize, d.Engine.GPUMemoryUtilization, reserve)
		if g, ok := d.HybridKV(); ok {
			why += "; hybrid KV cache: " + g.String()
		}
	}
	return model, why, res, nil
}

// kvLayout is model's hybrid KV layout (roofline.Arch.KVLayout), read
// from the catalogue or the config.json it names; nil for a model whose
// layers are of one kind, or that neither names (a linear model's free
// name: it has no layers to group).
func kvLayout(model string) *roofline.KVGroups {
	a, err := roofline.LoadModel(model)
	if err != nil {
		return nil
	}
	return a.KVLayout()
}

// KVBlocksFromMemory is the KV blocks one replica of d holds from GPU
// memory, as vLLM sizes them: its engine limits filled first (they size
// the profiling run whose peak is kept from the cache), then tokens of
// every layer over the block size, or under vLLM's hybrid KV cache manager
// (config.Deployment.HybridKV) blocks of one group's layers. reserve
// describes the memory kept besides the weights, for the prepare line.
func KVBlocksFromMemory(d *config.Deployment, res *resolve.Resolved) (blocks int64, reserve string, err error) {
	d.Engine.FillLimits(d.GPU)
	lim := roofline.EngineLimits{MaxNumSeqs: d.Engine.MaxNumSeqs, MaxNumBatchedTokens: d.Engine.MaxNumBatchedTokens}
	_, reserve = res.Roofline.MemoryReserve(lim)
	if g, ok := d.HybridKV(); ok {
		blocks, err = res.Roofline.KVHybridBlocks(d.Engine.GPUMemoryUtilization, lim, d.Engine.BlockSize, g)
		return blocks, reserve, err
	}
	tokens, err := res.KVCapacityTokens(d.Engine.GPUMemoryUtilization, lim)
	return tokens / int64(d.Engine.BlockSize), reserve, err
}

// kvBlockBytes is the bytes one KV block of d takes on a rank of the
// largest stage (roofline.KVBlockBytes under d's layout).
func kvBlockBytes(d *config.Deployment, r *roofline.Roofline) float64 {
	if g, ok := d.HybridKV(); ok {
		return r.KVBlockBytes(d.Engine.BlockSize, &g)
	}
	return r.KVBlockBytes(d.Engine.BlockSize, nil)
}

// prepareParallel adds a deployment's DP, EP and PP to its roofline
// (docs/latency.md, "Data, expert and pipeline parallelism"). Fitted
// coefficients describe TP alone: auto then takes the roofline, and an
// explicit fitted model is an error naming the key.
func prepareParallel(cfg *config.Cluster, key func(string) string, d *config.Deployment, res *resolve.Resolved) error {
	p := d.Parallel.Roofline()
	if !p.On() {
		return nil
	}
	if res.Coeffs != nil {
		if d.Latency.Mode == "fitted" || d.Latency.Coefficients != "" {
			return errors.New(cfg.Where(key("parallel"), fmt.Sprintf("fitted coefficients (%s) describe TP alone: use latency.mode roofline with dp, expert_parallel or pp", res.Path)))
		}
		res.Model, res.Coeffs, res.Path = res.Roofline, nil, ""
		res.Why = "latency: roofline (fitted coefficients describe TP alone; the deployment has " + describeParallel(p) + ")"
	}
	if err := res.Roofline.SetParallel(p); err != nil {
		k := "parallel"
		switch {
		case strings.Contains(err.Error(), "all2all_backend"):
			k = "parallel.all2all_backend"
		case strings.Contains(err.Error(), "pipeline stages"):
			k = "parallel.pp"
		case strings.Contains(err.Error(), "expert"):
			k = "parallel.expert_parallel"
		}
		return errors.New(cfg.Where(key(k), err.Error()))
	}
	if res.Coeffs == nil {
		res.Why += "; " + describeParallel(p)
	}
	return nil
}

func describeParallel(p roofline.Parallel) string {
	s := fmt.Sprintf("dp %d", max(p.DP, 1))
	if p.EP {
		s += ", expert parallel (" + p.All2All + ")"
	}
	if p.PP > 1 {
		s += fmt.Sprintf(", pp %d", p.PP)
	}
	return s
}

// resolveErr points a catalogue error at the config key it is about. The
// resolver speaks in flags ("--gpu: unknown GPU"); a config from a file
// gets "cluster.yaml:4: deployments[1].gpu: unknown GPU" instead.
func resolveErr(cfg *config.Cluster, key func(string) string, err error) error {
	if cfg.Name == "" {
		return err
	}
	msg := err.Error()
	for _, f := range []struct{ flag, key string }{{"--model", "model"}, {"--gpu", "gpu"}, {"--tp", "tp"},
		{"--weight-dtype", "weight_dtype"}, {"--kv-dtype", "kv_dtype"}, {"--coefficients", "latency.coefficients"},
		{"--latency", "latency.mode"}} {
		if rest, ok := strings.CutPrefix(msg, f.flag+": "); ok {
			return errors.New(cfg.Where(key(f.key), rest))
		}
	}
	return errors.New(cfg.Where(key("model"), msg))
}

// linearModel returns the linear model given by latency.beta/alpha, if any.
func linearModel(l *config.Latency) (*latency.Linear, bool) {
	if len(l.Beta) != 3 || (l.Mode != "linear" && l.Mode != "auto") {
		return nil, false
	}
	m := &latency.Linear{Beta0: l.Beta[0], Beta1: l.Beta[1], Beta2: l.Beta[2], Label: "linear:config"}
	m.A, _ = configAlpha(l)
	return m, true
}

// configAlpha returns latency.alpha [α0, α1, α2], if given.
func configAlpha(l *config.Latency) (latency.Alpha, bool) {
	if len(l.Alpha) != 3 {
		return latency.Alpha{}, false
	}
	return latency.Alpha{QueueBase: l.Alpha[0], QueuePerInputToken: l.Alpha[1], PerOutputToken: l.Alpha[2]}, true
}

// needsWeightBytes reports whether an autoscaled pool of d loads weights
// for a time derived from the model's weight bytes.
func needsWeightBytes(d *config.Deployment) bool {
	for _, p := range d.Pools {
		if a := p.Autoscaler; a != nil && a.WeightLoad.Time == 0 && a.WeightLoad.Bytes == 0 {
			return true
		}
	}
	return false
}
