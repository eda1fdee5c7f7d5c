package config

import (
	"errors"
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"
)

// PD is a P/D deployment's decider: which requests its prefill pool
// prefills. The others prefill on their decode replica, which then serves
// both roles (docs/engine.md, "Selective disaggregation").
type PD struct {
	// Decider is always (every request with output tokens: the default),
	// never (every request prefills on its decode replica), or
	// prefix-threshold: a request goes to the prefill pool when the prompt
	// tokens its decode replica does not hold in its prefix cache number
	// at least Threshold (upstream BLIS's prefix-threshold, llm-d's
	// prefix-based-pd-decider).
	Decider string `yaml:"decider"`
	// Threshold is prefix-threshold's uncached prompt tokens (0: every
	// request, as llm-d reads 0).
	Threshold int `yaml:"threshold"`
	// MaxPrefillQueue keeps a request local, whatever its length, while
	// the prefill pool's queue (waiting and in flight per replica) is above
	// it: NVIDIA Dynamo's conditional disaggregation (max_prefill_queue_size).
	// 0 = no limit.
	MaxPrefillQueue int `yaml:"max_prefill_queue"`
}

// DefaultPDThreshold is upstream BLIS's --pd-prefix-threshold default.
const DefaultPDThreshold = 512

// PDDeciders are the deciders a P/D deployment can use.
var PDDeciders = []string{"always", "never", "prefix-threshold"}

// DefaultPD is the decider of a P/D deployment that gives none.
func DefaultPD() PD { return PD{Decider: "always", Threshold: DefaultPDThreshold} }

// UnmarshalYAML fills absent keys with their defaults.
func (p *PD) UnmarshalYAML(n *yaml.Node) error {
	*p = DefaultPD()
	type plain PD
	return n.Decode((*plain)(p))
}

// Encode is how a deployment's encode pool ships a multimodal request's
// image embeddings to the replica that prefills it (E/P/D).
type Encode struct {
	// TokensPerImage is the image's tokens in the prompt (counted in
	// input_tokens): it sizes the embeddings sent and the encoder's
	// budget per step. Required: it depends on the model and the image
	// size (576 for LLaVA-1.5's 336² images).
	TokensPerImage int `yaml:"tokens_per_image"`
	// BytesPerToken is an embedding's bytes (0: the model's hidden size ×
	// 2, BF16, from the catalogue).
	BytesPerToken float64 `yaml:"bytes_per_token,omitempty"`
	// Link, BandwidthGBs and Latency are the transfer's, as kv_transfer's
	// (rdma: 50 GB/s per GPU × tp, 20 µs; nvlink: the GPU's NVLink × tp,
	// 5 µs).
	Link         string   `yaml:"link,omitempty"`
	BandwidthGBs *float64 `yaml:"bandwidth_gb_s,omitempty"`
	Latency      Duration `yaml:"latency"`
}

// UnmarshalYAML fills absent keys with their defaults.
func (e *Encode) UnmarshalYAML(n *yaml.Node) error {
	*e = Encode{Link: "rdma"}
	type plain Encode
	return n.Decode((*plain)(e))
}

// mergePools reads each pool's engine keys over the deployment's engine
// (a decode pool that says max_num_seqs: 512 keeps the deployment's other
// engine keys) and each pool's latency section over the defaults (it
// replaces the deployment's: its keys describe one model).
func (d *Deployment) mergePools(n *yaml.Node) error {
	var pools *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "pools" {
			pools = n.Content[i+1]
		}
	}
	if pools == nil || pools.Kind != yaml.SequenceNode {
		return nil
	}
	for j, pn := range pools.Content {
		if j >= len(d.Pools) || pn.Kind != yaml.MappingNode {
			continue
		}
		p := &d.Pools[j]
		for k := 0; k+1 < len(pn.Content); k += 2 {
			v := pn.Content[k+1]
			if v.Kind != yaml.MappingNode {
				continue
			}
			switch pn.Content[k].Value {
			case "engine":
				e := d.Engine
				if err := v.Decode(&e); err != nil {
					return err
				}
				p.Engine = &e
			case "latency":
				l := Latency{Mode: "auto"}
				if err := v.Decode(&l); err != nil {
					return err
				}
				p.Latency = &l
			}
		}
	}
	return nil
}

// OwnHardware reports whether a pool runs on hardware or engine settings
// of its own, and so has its own latency model and KV size.
func (p *Pool) OwnHardware() bool {
	return p.GPU != "" || p.TP != 0 || p.Engine != nil || p.Latency != nil
}

// ForPool is deployment d as its pool j runs it: d with the pool's GPU,
// TP, engine and latency where the pool gives them, and that pool alone.
func (d *Deployment) ForPool(j int) Deployment {
	p := d.Pools[j]
	x := *d
	if p.GPU != "" {
		x.GPU = p.GPU
	}
	if p.TP != 0 {
		x.TP = p.TP
	}
	if p.Engine != nil {
		x.Engine = *p.Engine
		x.Engine.KVLayout = d.Engine.KVLayout // the model's, whatever the pool's engine
	}
	if p.Latency != nil {
		x.Latency = *p.Latency
	}
	if p.GPUHourUSD != 0 {
		x.GPUHourUSD = p.GPUHourUSD
	}
	x.Pools = []Pool{p}
	return x
}

// PoolRef names pool Pool of deployment Dep (indices in Resolved order).
type PoolRef struct{ Dep, Pool int }

// OwnPools lists the pools with hardware of their own, deployment by
// deployment: engine.Prepare returns their latency models after the
// deployments' own, in this order.
func (c *Cluster) OwnPools() []PoolRef {
	var out []PoolRef
	for i, d := range c.Resolved() {
		for j := range d.Pools {
			if d.Pools[j].OwnHardware() {
				out = append(out, PoolRef{i, j})
			}
		}
	}
	return out
}

// validatePoolHardware checks a pool's own hardware keys.
func (c *Cluster) validatePoolHardware(i, j int, d *Deployment) error {
	p := &d.Pools[j]
	pk := func(k string) string { return fmt.Sprintf("deployments[%d].pools[%d].%s", i, j, k) }
	switch {
	case p.TP < 0:
		return errors.New(c.Where(pk("tp"), fmt.Sprintf("expected >= 1 (or absent: the deployment's), found %d", p.TP)))
	case !(p.GPUHourUSD >= 0) || math.IsInf(p.GPUHourUSD, 1):
		return errors.New(c.Where(pk("gpu_hour_usd"), fmt.Sprintf("expected a price >= 0, found %g", p.GPUHourUSD)))
	}
	if e := p.Engine; e != nil {
		if err := c.validateEngine(pk("engine"), e); err != nil {
			return err
		}
		// A request's KV moves between pools block for block, and its
		// prefix-cache keys are derived once per deployment.
		switch {
		case e.BlockSize != d.Engine.BlockSize:
			return errors.New(c.Where(pk("engine.block_size"), fmt.Sprintf("a pool keeps its deployment's block size (%d; KV moves between pools block for block), found %d", d.Engine.BlockSize, e.BlockSize)))
		case e.PrefixCaching != d.Engine.PrefixCaching:
			return errors.New(c.Where(pk("engine.enable_prefix_caching"), fmt.Sprintf("a pool keeps its deployment's prefix caching (%v: a request's cache keys are derived once), found %v", d.Engine.PrefixCaching, e.PrefixCaching)))
		}
	}
	if l := p.Latency; l != nil {
		if err := c.validateLatency(pk("latency"), l); err != nil {
			return err
		}
	}
	return nil
}

// validatePD checks a deployment's pd and encode sections against its
// pools.
func (c *Cluster) validatePD(i int, d *Deployment) error {
	key := func(k string) string { return fmt.Sprintf("deployments[%d].%s", i, k) }
	if p := d.PD; p != nil {
		ok := false
		for _, n := range PDDeciders {
			ok = ok || n == p.Decider
		}
		switch {
		case !d.IsPD():
			return errors.New(c.Where(key("pd"), "only used by a deployment with prefill and decode pools"))
		case !ok:
			msg := fmt.Sprintf("expected always, never or prefix-threshold, found %q", p.Decider)
			if s := Suggest(p.Decider, PDDeciders); s != "" {
				msg = "did you mean " + s + "? (" + msg + ")"
			}
			return errors.New(c.Where(key("pd.decider"), msg))
		case p.Threshold < 0:
			return errors.New(c.Where(key("pd.threshold"), fmt.Sprintf("expected uncached prompt tokens >= 0, found %d", p.Threshold)))
		case p.MaxPrefillQueue < 0:
			return errors.New(c.Where(key("pd.max_prefill_queue"), fmt.Sprintf("expected >= 0 (0 = no limit), found %d", p.MaxPrefillQueue)))
		case p.Decider != "always" && d.KVTransfer != nil && d.KVTransfer.Routing == "prefill-first":
			return errors.New(c.Where(key("pd.decider"), fmt.Sprintf("decider %s reads the decode replica's cache before the prefill is placed, so the decode replica is chosen first: use kv_transfer.routing: decode-first", p.Decider)))
		}
	}
	e := d.Encode
	switch {
	case e == nil && d.HasEncode():
		return errors.New(c.Where(fmt.Sprintf("deployments[%d]", i), "an encode pool needs encode: {tokens_per_image: N} (the image tokens in the prompt, which size the embeddings it sends)"))
	case e == nil:
		return nil
	case !d.HasEncode():
		return errors.New(c.Where(key("encode"), "only used by a deployment with an encode pool"))
	case e.TokensPerImage < 1:
		return errors.New(c.Where(key("encode.tokens_per_image"), fmt.Sprintf("expected the image tokens in the prompt (>= 1; 576 for LLaVA-1.5), found %d", e.TokensPerImage)))
	case !(e.BytesPerToken >= 0) || math.IsInf(e.BytesPerToken, 1):
		return errors.New(c.Where(key("encode.bytes_per_token"), fmt.Sprintf("expected a finite number >= 0, found %g", e.BytesPerToken)))
	case e.Link != "rdma" && e.Link != "nvlink":
		return errors.New(c.Where(key("encode.link"), fmt.Sprintf("expected rdma or nvlink, found %q", e.Link)))
	case e.BandwidthGBs != nil && (!(*e.BandwidthGBs > 0) || math.IsInf(*e.BandwidthGBs, 1)):
		return errors.New(c.Where(key("encode.bandwidth_gb_s"), fmt.Sprintf("expected a finite bandwidth > 0 (GB/s), found %g", *e.BandwidthGBs)))
	}
	for j := range d.Pools {
		if d.Pools[j].Role != "encode" {
			continue
		}
		if d.Pools[j].Autoscaler != nil {
			return errors.New(c.Where(fmt.Sprintf("deployments[%d].pools[%d].autoscaler", i, j), "an encode pool cannot be autoscaled (not modelled): give it a fixed replica count"))
		}
		l := d.Latency
		if d.Pools[j].Latency != nil {
			l = *d.Pools[j].Latency
		}
		if l.ImageEncodeUS <= 0 {
			return errors.New(c.Where(fmt.Sprintf("deployments[%d].pools[%d]", i, j), "an encode pool needs latency.image_encode_us (µs per image on its GPU; the simulator has no encoder profile): set it on the pool or the deployment"))
		}
	}
	return nil
}
