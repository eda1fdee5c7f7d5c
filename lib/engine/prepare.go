package engine

import (
	"fmt"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/resolve"
)

// Prepare picks the latency model cfg asks for and fills engine.kv_blocks
// when it is 0 (KV capacity from GPU memory × gpu_memory_utilization minus
// weights, over the model's KV bytes per token). why is one line for stderr.
// A latency.beta in the config is used as a linear model; KV capacity then
// still comes from the model/GPU catalogue unless kv_blocks is set.
func Prepare(cfg *Config) (model latency.Model, why string, err error) {
	lin, isLinear := cfg.LinearModel()
	var res *resolve.Resolved
	if !isLinear || cfg.Engine.KVBlocks == 0 {
		mode := cfg.Latency.Mode
		if mode == "linear" {
			mode = "auto"
		}
		res, err = resolve.Resolve(resolve.Spec{Mode: mode, Model: cfg.Model, GPU: cfg.GPU, TP: cfg.TP,
			WeightDtype: cfg.WeightDtype, KVDtype: cfg.KVDtype, CoefficientsFile: cfg.Latency.Coefficients})
		if err != nil {
			return nil, "", err
		}
	}
	if isLinear {
		model = lin
		why = fmt.Sprintf("latency: linear model from config (β=%v, α=%v)", cfg.Latency.Beta, cfg.Latency.Alpha)
	} else {
		model, why = res.Model, res.Why
	}
	if cfg.Engine.KVBlocks == 0 {
		tokens, err := res.KVCapacityTokens(cfg.Engine.GPUMemoryUtilization)
		if err != nil {
			return nil, "", err
		}
		cfg.Engine.KVBlocks = tokens / int64(cfg.Engine.BlockSize)
		if cfg.Engine.KVBlocks < 1 {
			return nil, "", fmt.Errorf("%s on %s tp%d holds %d KV tokens: less than one block of %d", cfg.Model, cfg.GPU, cfg.TP, tokens, cfg.Engine.BlockSize)
		}
		if cfg.Engine.KVBlocks > 1<<31-1 {
			cfg.Engine.KVBlocks = 1<<31 - 1
		}
		why += fmt.Sprintf("; KV: %d blocks of %d tokens per replica (gpu_memory_utilization %g)", cfg.Engine.KVBlocks, cfg.Engine.BlockSize, cfg.Engine.GPUMemoryUtilization)
	}
	return model, why, nil
}
