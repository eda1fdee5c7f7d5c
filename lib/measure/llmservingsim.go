package measure

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// RunConfig is the engine configuration of a recorded run, from the
// llmservingsim meta.json (or flags). Zero fields mean "not recorded".
type RunConfig struct {
	Model               string
	Engine              string
	Version             string
	Device              string
	TP                  int
	MaxNumSeqs          int
	MaxNumBatchedTokens int
	KVBlocks            int
	BlockSize           int
	PrefixCaching       bool
	// AsyncScheduling is vLLM's scheduler_config.async_scheduling as the
	// run resolved it; nil when not recorded.
	AsyncScheduling *bool
}

type llmssMeta struct {
	Model        string `json:"model"`
	VLLMVersion  string `json:"vllm_version"`
	EngineKwargs struct {
		TP                  *int `json:"tensor_parallel_size"`
		MaxNumSeqs          *int `json:"max_num_seqs"`
		MaxNumBatchedTokens *int `json:"max_num_batched_tokens"`
	} `json:"engine_kwargs"`
	KVCache *struct {
		NumGPUBlocks        *int `json:"num_gpu_blocks"`
		BlockSize           *int `json:"block_size"`
		EnablePrefixCaching bool `json:"enable_prefix_caching"`
	} `json:"kv_cache"`
	Hardware *struct {
		DeviceName string `json:"device_name"`
	} `json:"hardware"`
	Resolved *struct {
		Scheduler *struct {
			Async *bool `json:"async_scheduling"`
		} `json:"scheduler_config"`
	} `json:"resolved_config"`
}

// ReadRunMeta reads an llmservingsim meta.json. Unknown keys are allowed:
// the file carries vLLM's whole resolved config.
func ReadRunMeta(path string, r io.Reader) (RunConfig, error) {
	var m llmssMeta
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return RunConfig{}, &InputError{Path: path, Msg: "expected an llmservingsim meta.json object: " + err.Error()}
	}
	c := RunConfig{Model: m.Model, Engine: "vllm", Version: m.VLLMVersion}
	// Absent (or null) settings stay 0, the caller's default; a value
	// present must be positive.
	type setting struct {
		field  string
		v, dst *int
	}
	set := []setting{
		{"engine_kwargs.tensor_parallel_size", m.EngineKwargs.TP, &c.TP},
		{"engine_kwargs.max_num_seqs", m.EngineKwargs.MaxNumSeqs, &c.MaxNumSeqs},
		{"engine_kwargs.max_num_batched_tokens", m.EngineKwargs.MaxNumBatchedTokens, &c.MaxNumBatchedTokens},
	}
	if m.KVCache != nil {
		c.PrefixCaching = m.KVCache.EnablePrefixCaching
		set = append(set, setting{"kv_cache.num_gpu_blocks", m.KVCache.NumGPUBlocks, &c.KVBlocks},
			setting{"kv_cache.block_size", m.KVCache.BlockSize, &c.BlockSize})
	}
	for _, f := range set {
		if f.v == nil {
			continue
		}
		if *f.v <= 0 {
			return c, &InputError{Path: path, Field: f.field, Msg: fmt.Sprintf("expected a positive integer, found %d", *f.v)}
		}
		*f.dst = *f.v
	}
	if m.Hardware != nil {
		c.Device = m.Hardware.DeviceName
	}
	if m.Resolved != nil && m.Resolved.Scheduler != nil {
		c.AsyncScheduling = m.Resolved.Scheduler.Async
	}
	return c, nil
}

// ReadRunMetaFile is ReadRunMeta on a file.
func ReadRunMetaFile(path string) (RunConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return RunConfig{}, &InputError{Path: path, Msg: err.Error()}
	}
	defer f.Close()
	return ReadRunMeta(path, f)
}

// DeviceGPU maps a CUDA device name ("NVIDIA GeForce RTX 4090") to a
// catalogue GPU name; "" when unknown (then the user must name the GPU).
func DeviceGPU(dev string) string {
	d := strings.ToLower(dev)
	if strings.Contains(d, "a100") && strings.Contains(d, "40gb") {
		return "" // the catalogue's A100 is the 80 GB card: KV capacity would be wrong
	}
	// gb200 before b200, which it contains.
	for _, m := range []struct{ sub, gpu string }{
		{"rtx 4090", "rtx4090"}, {"rtx pro 6000", "rtxpro6000"}, {"h100", "h100"}, {"h200", "h200"},
		{"gb200", "gb200"}, {"b200", "b200"}, {"a100", "a100-80gb"}, {"l40s", "l40s"},
	} {
		if strings.Contains(d, m.sub) {
			return m.gpu
		}
	}
	return ""
}
