package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoRA is a deployment's LoRA adapters (docs/engine.md, "LoRA"; in vLLM's
// --enable-lora terms). Absent: requests naming an adapter are errors.
type LoRA struct {
	// Adapters is the registry: the names a request's lora column may hold.
	Adapters []Adapter `yaml:"adapters"`
	// MaxLoras is the adapters resident on the GPU at once, the distinct
	// adapters a step may serve (vLLM's --max-loras, default 1).
	MaxLoras int `yaml:"max_loras"`
	// MaxLoraRank is the largest rank a slot holds (vLLM's
	// --max-lora-rank, default 16): vLLM reserves max_loras slots of this
	// rank out of GPU memory, whatever the adapters' own ranks.
	MaxLoraRank int `yaml:"max_lora_rank"`
	// MaxCPULoras, when > 0, is the adapters kept in host memory (vLLM's
	// --max-cpu-loras): an adapter in neither cache loads from local
	// storage first. 0: every adapter is in host memory.
	MaxCPULoras int `yaml:"max_cpu_loras,omitempty"`
	// TargetModules is the modules of an adapter that names none (PEFT's
	// default for Llama-family models: q_proj, v_proj).
	TargetModules []string `yaml:"target_modules,omitempty"`

	// Filled by the engine's Prepare from the catalogues: the host link
	// (GPU host_link_gb_s × tp, the CPU KV tier's) and local storage
	// (the storage KV tier's) bandwidths per replica, in 10^9 B/s.
	HostGBps    float64 `yaml:"-"`
	StorageGBps float64 `yaml:"-"`
}

// Adapter is one LoRA adapter: its rank and the modules it adapts (its size
// then follows from the model's shapes) or its size in bytes.
type Adapter struct {
	Name          string   `yaml:"name"`
	Rank          int      `yaml:"rank"`
	TargetModules []string `yaml:"target_modules,omitempty"`
	// SizeBytes, when > 0, is the adapter's weights in bytes (all TP
	// ranks), in place of the size derived from rank and modules.
	SizeBytes int64 `yaml:"size_bytes,omitempty"`

	// Filled by the engine's Prepare: the weights in bytes (all ranks) and
	// the shrink/expand FLOPs per adapted token.
	Bytes int64 `yaml:"-"`
	FLOPs int64 `yaml:"-"`
}

// LoRAModules are the projections an adapter may target, in layer order.
var LoRAModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// DefaultLoRAModules is PEFT's default target_modules for Llama-family models.
var DefaultLoRAModules = []string{"q_proj", "v_proj"}

// LoRARanks are vLLM's max_lora_rank choices (vllm/config/lora.py).
var LoRARanks = []int{1, 8, 16, 32, 64, 128, 256, 320, 512}

// UnmarshalYAML fills absent keys with vLLM's defaults.
func (l *LoRA) UnmarshalYAML(n *yaml.Node) error {
	*l = LoRA{MaxLoras: 1, MaxLoraRank: 16}
	type plain LoRA
	return n.Decode((*plain)(l))
}

// Modules is the adapter's target modules (the registry's default when it
// names none).
func (l *LoRA) Modules(a *Adapter) []string {
	if len(a.TargetModules) > 0 {
		return a.TargetModules
	}
	if len(l.TargetModules) > 0 {
		return l.TargetModules
	}
	return DefaultLoRAModules
}

// Index is the adapters by name (0-based registry order).
func (l *LoRA) Index() map[string]int {
	m := make(map[string]int, len(l.Adapters))
	for i, a := range l.Adapters {
		m[a.Name] = i
	}
	return m
}

func (c *Cluster) validateLoRA(i int, d *Deployment) error {
	l := d.LoRA
	if l == nil {
		return nil
	}
	key := func(k string) string { return c.DeploymentKey(i, "lora."+k) }
	switch {
	case l.MaxLoras < 1 || l.MaxLoras > 1024:
		return errors.New(c.Where(key("max_loras"), fmt.Sprintf("expected 1 to 1024 resident adapters, found %d", l.MaxLoras)))
	case !slices.Contains(LoRARanks, l.MaxLoraRank):
		return errors.New(c.Where(key("max_lora_rank"), fmt.Sprintf("expected one of vLLM's max_lora_rank choices %v, found %d", LoRARanks, l.MaxLoraRank)))
	case l.MaxCPULoras != 0 && l.MaxCPULoras < l.MaxLoras:
		return errors.New(c.Where(key("max_cpu_loras"), fmt.Sprintf("expected 0 (every adapter in host memory) or at least max_loras (%d), found %d", l.MaxLoras, l.MaxCPULoras)))
	case len(l.Adapters) == 0:
		return errors.New(c.Where(c.DeploymentKey(i, "lora"), "expected adapters: a list of {name, rank}"))
	case len(l.Adapters) > 65535:
		return errors.New(c.Where(key("adapters"), fmt.Sprintf("expected at most 65535 adapters, found %d", len(l.Adapters))))
	}
	if err := c.loraModules(key("target_modules"), l.TargetModules); err != nil {
		return err
	}
	seen := map[string]bool{}
	for j := range l.Adapters {
		a := &l.Adapters[j]
		ak := func(k string) string { return key(fmt.Sprintf("adapters[%d].%s", j, k)) }
		switch {
		case a.Name == "":
			return errors.New(c.Where(ak("name"), "expected the adapter's name (the requests' lora column)"))
		case seen[a.Name]:
			return errors.New(c.Where(ak("name"), fmt.Sprintf("adapter %q is listed twice", a.Name)))
		case a.Rank < 1:
			return errors.New(c.Where(ak("rank"), fmt.Sprintf("expected a rank >= 1, found %d", a.Rank)))
		case a.Rank > l.MaxLoraRank:
			return errors.New(c.Where(ak("rank"), fmt.Sprintf("rank %d of adapter %q is above max_lora_rank %d", a.Rank, a.Name, l.MaxLoraRank)))
		case a.SizeBytes < 0:
			return errors.New(c.Where(ak("size_bytes"), fmt.Sprintf("expected bytes >= 0, found %d", a.SizeBytes)))
		}
		seen[a.Name] = true
		if err := c.loraModules(ak("target_modules"), a.TargetModules); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) loraModules(key string, ms []string) error {
	seen := map[string]bool{}
	for j, m := range ms {
		k := fmt.Sprintf("%s[%d]", key, j)
		if seen[m] {
			return errors.New(c.Where(k, fmt.Sprintf("module %q is listed twice", m)))
		}
		seen[m] = true
		if err := oneOf(c, k, m, LoRAModules); err != nil {
			return err
		}
	}
	return nil
}

// AdapterNames lists the registry's names, for errors.
func (l *LoRA) AdapterNames() string {
	names := make([]string, 0, len(l.Adapters))
	for _, a := range l.Adapters {
		names = append(names, a.Name)
	}
	if len(names) > 8 {
		names = append(names[:8], "…")
	}
	return strings.Join(names, ", ")
}
