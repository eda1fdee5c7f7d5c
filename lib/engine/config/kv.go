package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/roofline"
)

// KV is a deployment's tiered KV cache: the GPU blocks (engine.kv_blocks)
// and, below them, any number of lower tiers (CPU memory, local storage,
// ...) that receive blocks by the offload policy and give them back on a
// prefix hit (docs/engine.md, "Tiered KV").
type KV struct {
	// Offload is when blocks are copied to the first lower tier: none,
	// eager (as they are cached), lazy (as the GPU evicts them) or
	// threshold (eagerly while GPU KV use is at least Threshold, else
	// lazily).
	Offload string `yaml:"offload"`
	// Threshold is the GPU KV use (fraction of blocks) above which the
	// threshold policy copies eagerly; 0 = 0.8.
	Threshold float64 `yaml:"threshold,omitempty"`
	Tiers     []Tier  `yaml:"tiers,omitempty"`
	// BytesPerToken is the KV bytes one token takes on a replica (all TP
	// ranks); 0 = from the model catalogue (engine.Prepare fills it).
	BytesPerToken float64 `yaml:"bytes_per_token,omitempty"`
}

// Tier is one lower KV tier of every replica of the deployment. Tiers are
// listed top down: a block evicted from one moves to the next.
type Tier struct {
	// Name names the tier (results column cached_tokens_<name>); a name in
	// TierKinds takes that kind's defaults.
	Name string `yaml:"name"`
	// Capacity per replica, in GiB of KV (converted with BytesPerToken) or
	// blocks; exactly one is given.
	CapacityGiB    float64 `yaml:"capacity_gib,omitempty"`
	CapacityBlocks int64   `yaml:"capacity_blocks,omitempty"`
	// BandwidthGBs is the tier's bandwidth to the GPUs of one replica,
	// 10^9 B/s; nil = its kind's default (TierKinds), required otherwise.
	BandwidthGBs *float64 `yaml:"bandwidth_gb_s,omitempty"`
	// Latency is paid once per transfer (a request's load from this tier);
	// 0 = its kind's default (TierKinds), else none.
	Latency Duration `yaml:"latency"`
	// Eviction order when the tier is full: lru (default), lfu, priority.
	Eviction string `yaml:"eviction,omitempty"`
}

// KVTransfer is how a P/D deployment moves a request's KV from its prefill
// replica to its decode replica.
type KVTransfer struct {
	// Link picks the defaults: rdma (between nodes: 50 GB/s per GPU, a
	// 400 Gb/s NIC each, 20 µs) or nvlink (within a node: the GPU's
	// NVLink bandwidth, 5 µs).
	Link         string   `yaml:"link,omitempty"`
	BandwidthGBs *float64 `yaml:"bandwidth_gb_s,omitempty"` // per replica pair, 10^9 B/s; nil = the link's default × tp
	Latency      Duration `yaml:"latency"`                  // per transfer; 0 = the link's default
	// Granularity is when the prefill replica sends (docs/engine.md,
	// "KV transfer"): block (the whole prompt's KV after the prefill's last
	// chunk), chunk (each prefill chunk's KV as its step ends) or stream
	// (each chunk's KV layer by layer while its step computes).
	Granularity string `yaml:"granularity"`
	// Pipelined lets the decode replica start the request's first step
	// before the last byte arrived, once every layer's KV will be in place
	// before that step's forward pass reaches the layer.
	Pipelined bool `yaml:"pipelined"`
	// Layers is the model's layer count (stream and pipelined time the
	// transfer per layer); 0 = from the model catalogue (engine.Prepare).
	Layers int `yaml:"layers,omitempty"`
	// Routing is when the decode replica is chosen: decode-first (at
	// arrival, as llm-d does) or prefill-first (when the prefill ends).
	Routing string `yaml:"routing"`
	// MaxQueue is the outgoing transfers (waiting for a decode replica's
	// blocks or in flight) above which a prefill replica admits no new
	// prefills; 0 = 8.
	MaxQueue int `yaml:"max_queue,omitempty"`
	// Sharing is how transfers that overlap share the links: fifo ("" too;
	// each
	// prefill replica's link sends one transfer at a time, at full
	// bandwidth) or fair (every transfer in progress gets a max-min fair
	// share of its sender's and its receiver's link).
	Sharing string `yaml:"sharing"`
}

// Defaults of the KV settings.
const (
	DefaultOffloadThreshold = 0.8
	DefaultRDMAGBs          = 50.0 // per GPU: one 400 Gb/s NIC
	DefaultRDMALatencyUS    = 20
	DefaultNVLinkLatencyUS  = 5
	DefaultMaxTransferQueue = 8
)

// TierKind is what the config knows of a lower tier by its name: the
// defaults of the keys it leaves out. A tier named otherwise gives its
// bandwidth; its latency defaults to 0.
type TierKind struct {
	// HostLink: the default bandwidth is the GPU's host link (its
	// catalogue entry) × tp; else GBs per replica.
	HostLink  bool
	GBs       float64
	LatencyUS int64
	// MaxGiB is the most capacity per replica that is plausible (0: no
	// limit): beyond it a capacity is a typo or a unit mix-up.
	MaxGiB float64
}

// TierKinds are the lower tiers with defaults, by name. A new kind of tier
// with defaults is one entry here (and a line in docs/engine.md).
var TierKinds = map[string]TierKind{
	// Host DRAM over the GPU's PCIe/C2C link; 10 µs per transfer (a
	// cudaMemcpyAsync launch and its DMA setup). The largest common 8-GPU
	// servers ship with 2–4 TiB of DRAM.
	"cpu": {HostLink: true, LatencyUS: 10, MaxGiB: 4096},
	// Local NVMe: 5 GB/s per replica (a PCIe 4 x4 SSD's sequential read),
	// 200 µs per transfer (an NVMe read's latency with queueing).
	"storage": {GBs: 5, LatencyUS: 200},
}

// DefaultKVTransfer is the kv_transfer of a deployment that gives none.
func DefaultKVTransfer() KVTransfer {
	return KVTransfer{Link: "rdma", Granularity: "block", Routing: "decode-first", Sharing: "fifo"}
}

// NeedsLayers reports whether the transfer is timed per layer (stream
// granularity or pipelined decode), which needs the model's layer count.
func (t *KVTransfer) NeedsLayers() bool { return t.Granularity == "stream" || t.Pipelined }

// UnmarshalYAML fills absent keys with their defaults.
func (t *KVTransfer) UnmarshalYAML(n *yaml.Node) error {
	*t = DefaultKVTransfer()
	type plain KVTransfer
	return n.Decode((*plain)(t))
}

// HasTiers reports whether the deployment has lower KV tiers.
func (k *KV) HasTiers() bool { return len(k.Tiers) > 0 && k.Offload != "none" }

// HybridKV is the hybrid KV cache layout (roofline.KVGroups) d's replicas
// keep, as vLLM's hybrid KV cache manager does for a model that mixes
// full and sliding-window layers (engine.KVLayout, filled by
// engine.Prepare); false keeps every layer's KV for every token: a model
// without windows, engine.disable_hybrid_kv_cache_manager, or a deployment
// whose KV leaves the GPU (lower tiers, P/D transfers: vLLM turns the
// manager off when a KV connector is configured), a draft model (its
// layers would join the groups: not modelled), or a layout of more than
// one full-attention group (not modelled: its decode would take a block
// per group at each block boundary).
func (d *Deployment) HybridKV() (roofline.KVGroups, bool) {
	g := d.Engine.KVLayout
	if g == nil || g.Full != 1 || d.Engine.DisableHybridKVCacheManager || d.IsPD() || d.KV != nil && d.KV.HasTiers() || d.Speculative != nil && d.Speculative.Method != SpecNgram {
		return roofline.KVGroups{}, false
	}
	return *g, true
}

// IsPD reports whether the deployment has prefill and decode pools.
func (d *Deployment) IsPD() bool {
	for _, p := range d.Pools {
		if p.Role == "prefill" || p.Role == "decode" {
			return true
		}
	}
	return false
}

// HasEncode reports whether the deployment has an encode pool.
func (d *Deployment) HasEncode() bool {
	for _, p := range d.Pools {
		if p.Role == "encode" {
			return true
		}
	}
	return false
}

func (c *Cluster) validateKV(at string, kv *KV) error {
	k := func(s string) string { return at + "." + s }
	switch kv.Offload {
	case "none", "eager", "lazy", "threshold":
	default:
		return errors.New(c.Where(k("offload"), fmt.Sprintf("expected none, eager, lazy or threshold, found %q", kv.Offload)))
	}
	if kv.Threshold < 0 || kv.Threshold > 1 || math.IsNaN(kv.Threshold) {
		return errors.New(c.Where(k("threshold"), fmt.Sprintf("expected a fraction of GPU KV blocks in [0, 1], found %g", kv.Threshold)))
	}
	if !(kv.BytesPerToken >= 0) || math.IsInf(kv.BytesPerToken, 1) {
		return errors.New(c.Where(k("bytes_per_token"), fmt.Sprintf("expected a finite number >= 0, found %g", kv.BytesPerToken)))
	}
	for i := range kv.Tiers {
		t := &kv.Tiers[i]
		tk := func(s string) string { return fmt.Sprintf("%s.tiers[%d].%s", at, i, s) }
		kind := TierKinds[t.Name]
		switch {
		case !tierName.MatchString(t.Name) || t.Name == "gpu":
			return errors.New(c.Where(tk("name"), fmt.Sprintf("expected a name of lower-case letters, digits and _ (not gpu; e.g. %s), found %q", strings.Join(tierKindNames(), ", "), t.Name)))
		case slices.ContainsFunc(kv.Tiers[:i], func(u Tier) bool { return u.Name == t.Name }):
			return errors.New(c.Where(tk("name"), fmt.Sprintf("tier %s is listed twice", t.Name)))
		case TierKinds[t.Name] == (TierKind{}) && t.BandwidthGBs == nil:
			return errors.New(c.Where(fmt.Sprintf("%s.tiers[%d]", at, i), fmt.Sprintf("a tier named %s has no default bandwidth (the tiers with defaults: %s): set bandwidth_gb_s (10^9 B/s to one replica's GPUs)", t.Name, strings.Join(tierKindNames(), ", "))))
		case t.CapacityGiB != 0 && t.CapacityBlocks != 0:
			return errors.New(c.Where(tk("capacity_gib"), "give capacity_gib or capacity_blocks, not both"))
		case t.CapacityGiB == 0 && t.CapacityBlocks == 0:
			return errors.New(c.Where(fmt.Sprintf("%s.tiers[%d]", at, i), "expected a capacity: capacity_gib or capacity_blocks"))
		case !(t.CapacityGiB >= 0) || math.IsInf(t.CapacityGiB, 1):
			return errors.New(c.Where(tk("capacity_gib"), fmt.Sprintf("expected a finite number > 0, found %g", t.CapacityGiB)))
		case t.CapacityBlocks < 0 || t.CapacityBlocks > math.MaxInt32:
			return errors.New(c.Where(tk("capacity_blocks"), fmt.Sprintf("expected 1 to %d, found %d", math.MaxInt32, t.CapacityBlocks)))
		case kind.MaxGiB > 0 && t.CapacityGiB > kind.MaxGiB:
			return errors.New(c.Where(tk("capacity_gib"), fmt.Sprintf("%g GiB of %s per replica is more than a machine plausibly has (at most %g GiB)", t.CapacityGiB, t.Name, kind.MaxGiB)))
		case t.BandwidthGBs != nil && (!(*t.BandwidthGBs > 0) || math.IsInf(*t.BandwidthGBs, 1)):
			return errors.New(c.Where(tk("bandwidth_gb_s"), fmt.Sprintf("expected a finite bandwidth > 0 (GB/s), found %g", *t.BandwidthGBs)))
		}
		switch t.Eviction {
		case "", "lru", "lfu", "priority":
		default:
			return errors.New(c.Where(tk("eviction"), fmt.Sprintf("expected lru, lfu or priority, found %q", t.Eviction)))
		}
	}
	return nil
}

func (c *Cluster) validateKVTransfer(at string, t *KVTransfer) error {
	k := func(s string) string { return at + "." + s }
	switch {
	case t.Link != "rdma" && t.Link != "nvlink":
		return errors.New(c.Where(k("link"), fmt.Sprintf("expected rdma or nvlink, found %q", t.Link)))
	case t.BandwidthGBs != nil && (!(*t.BandwidthGBs > 0) || math.IsInf(*t.BandwidthGBs, 1)):
		return errors.New(c.Where(k("bandwidth_gb_s"), fmt.Sprintf("expected a finite bandwidth > 0 (GB/s), found %g", *t.BandwidthGBs)))
	case t.Granularity != "block" && t.Granularity != "chunk" && t.Granularity != "stream":
		return errors.New(c.Where(k("granularity"), fmt.Sprintf("expected block, chunk or stream, found %q", t.Granularity)))
	case t.Routing != "decode-first" && t.Routing != "prefill-first":
		return errors.New(c.Where(k("routing"), fmt.Sprintf("expected decode-first or prefill-first, found %q", t.Routing)))
	case t.Granularity != "block" && t.Routing != "decode-first":
		return errors.New(c.Where(k("granularity"), fmt.Sprintf("granularity %s sends KV while the prefill runs, so the decode replica must be known and reserve its blocks before: use routing: decode-first (or granularity: block)", t.Granularity)))
	case t.Layers < 0 || t.Layers > 10000:
		return errors.New(c.Where(k("layers"), fmt.Sprintf("expected the model's layer count (1 to 10000), found %d", t.Layers)))
	case t.MaxQueue < 0:
		return errors.New(c.Where(k("max_queue"), fmt.Sprintf("expected >= 0, found %d", t.MaxQueue)))
	case t.Sharing != "" && t.Sharing != "fifo" && t.Sharing != "fair":
		return errors.New(c.Where(k("sharing"), fmt.Sprintf("expected fifo or fair, found %q", t.Sharing)))
	case t.Sharing == "fair" && (t.Granularity == "stream" || t.Pipelined):
		// A streamed piece is paced by the prefill's compute, and a
		// pipelined start needs the last byte's time when the transfer
		// begins: under fair sharing both depend on transfers not begun yet.
		return errors.New(c.Where(k("sharing"), fmt.Sprintf("fair sharing times each transfer as a flow that later transfers slow down: use granularity block or chunk without pipelined (found granularity %s, pipelined %v), or sharing: fifo", t.Granularity, t.Pipelined)))
	}
	return nil
}

var tierName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// tierKindNames lists TierKinds' names, sorted.
func tierKindNames() []string {
	names := make([]string, 0, len(TierKinds))
	for n := range TierKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// validatePools checks a deployment's pool roles: monolithic pools, or
// one prefill and one decode pool; and at most one encode pool beside
// them.
func (c *Cluster) validatePools(i int, d *Deployment) error {
	var mono, pre, dec, enc int
	for j, p := range d.Pools {
		switch p.Role {
		case "monolithic":
			mono++
		case "prefill":
			pre++
		case "decode":
			dec++
		case "encode":
			enc++
		default:
			msg := fmt.Sprintf("expected monolithic, prefill, decode or encode, found %q", p.Role)
			if s := Suggest(p.Role, []string{"monolithic", "prefill", "decode", "encode"}); s != "" {
				msg = "did you mean " + s + "? (" + msg + ")"
			}
			return errors.New(c.Where(fmt.Sprintf("deployments[%d].pools[%d].role", i, j), msg))
		}
	}
	at := fmt.Sprintf("deployments[%d].pools", i)
	switch {
	case dec > 0 && pre == 0:
		return errors.New(c.Where(at, "a decode pool needs a prefill pool (add {role: prefill, replicas: N})"))
	case pre > 0 && dec == 0:
		return errors.New(c.Where(at, "a prefill pool needs a decode pool (add {role: decode, replicas: N})"))
	case mono > 0 && pre > 0:
		return errors.New(c.Where(at, "a deployment is either monolithic or prefill/decode; put the monolithic pool in its own deployment"))
	case pre > 1 || dec > 1:
		return errors.New(c.Where(at, "expected one prefill pool and one decode pool"))
	case enc > 1:
		return errors.New(c.Where(at, "expected at most one encode pool"))
	case enc > 0 && mono == 0 && pre == 0:
		return errors.New(c.Where(at, "an encode pool encodes images for a monolithic or prefill pool: add one"))
	}
	return nil
}

// UnmarshalYAML fills absent keys with their defaults (offload: lazy).
func (k *KV) UnmarshalYAML(n *yaml.Node) error {
	*k = KV{Offload: "lazy"}
	type plain KV
	return n.Decode((*plain)(k))
}

// TierNames is the run's lower-tier names (row.TierNames over the
// deployments that have tiers): the index of a result's CachedTokensTier.
func (c *Cluster) TierNames() []string {
	var per [][]string
	for _, d := range c.Resolved() {
		if d.KV == nil || !d.KV.HasTiers() {
			continue
		}
		names := make([]string, len(d.KV.Tiers))
		for i, t := range d.KV.Tiers {
			names[i] = t.Name
		}
		per = append(per, names)
	}
	return row.TierNames(per)
}
