package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/roofline"
)

// needsCatalogue reports whether a deployment's KV tiers or P/D transfer
// need numbers only the catalogues have (KV bytes per token, the GPU's
// host link).
func needsCatalogue(d *config.Deployment) bool {
	if d.KV == nil && !d.IsPD() {
		return false
	}
	if d.KV == nil || d.KV.BytesPerToken == 0 {
		return true
	}
	for _, t := range d.KV.Tiers {
		if config.TierKinds[t.Name].HostLink && t.BandwidthGBs == nil {
			return true
		}
	}
	return d.IsPD() && (d.KVTransfer == nil || d.KVTransfer.BandwidthGBs == nil || d.KVTransfer.NeedsLayers() && d.KVTransfer.Layers == 0)
}

// prepareKV fills the KV tiers' and the KV transfer's defaults from the
// catalogues: bytes per token (all TP ranks), tier capacities in blocks,
// bandwidths and latencies. Errors name the key.
func prepareKV(cfg *config.Cluster, i int, d *config.Deployment, res *resolve.Resolved) error {
	if d.KV == nil && !d.IsPD() {
		return nil
	}
	key := func(k string) string { return cfg.DeploymentKey(i, k) }
	if d.KV == nil {
		d.KV = &config.KV{Offload: "none"}
	}
	var gpu *roofline.GPU
	if res != nil && res.Roofline != nil {
		gpu = &res.Roofline.G
		if d.KV.BytesPerToken == 0 {
			d.KV.BytesPerToken = res.Roofline.KVBytesPerTokenReplica()
		}
	}
	if d.KV.BytesPerToken <= 0 {
		return errors.New(cfg.Where(key("kv.bytes_per_token"), "unknown for this model: set it (KV bytes per token on one replica)"))
	}
	if d.KV.Offload == "threshold" && d.KV.Threshold == 0 {
		d.KV.Threshold = config.DefaultOffloadThreshold
	}
	blockBytes := d.KV.BytesPerToken * float64(d.Engine.BlockSize)
	for j := range d.KV.Tiers {
		t := &d.KV.Tiers[j]
		tk := func(k string) string { return key(fmt.Sprintf("kv.tiers[%d].%s", j, k)) }
		if t.CapacityGiB > 0 {
			blocks := t.CapacityGiB * (1 << 30) / blockBytes
			if blocks < 1 {
				return errors.New(cfg.Where(tk("capacity_gib"), fmt.Sprintf("%g GiB is less than one KV block (%d tokens × %g B = %.0f B)", t.CapacityGiB, d.Engine.BlockSize, d.KV.BytesPerToken, blockBytes)))
			}
			if blocks > 1<<31-1 {
				return errors.New(cfg.Where(tk("capacity_gib"), fmt.Sprintf("%g GiB is more than 2^31 KV blocks of %.0f B", t.CapacityGiB, blockBytes)))
			}
			t.CapacityBlocks, t.CapacityGiB = int64(blocks), 0
		}
		kind, known := config.TierKinds[t.Name]
		if t.BandwidthGBs == nil {
			bw := kind.GBs
			switch {
			case !known:
				return errors.New(cfg.Where(tk("bandwidth_gb_s"), fmt.Sprintf("a tier named %s has no default bandwidth: set it", t.Name)))
			case kind.HostLink:
				if gpu == nil || gpu.HostLinkGBps <= 0 {
					return errors.New(cfg.Where(tk("bandwidth_gb_s"), fmt.Sprintf("the GPU %q has no host link bandwidth in its catalogue entry: set it", d.GPU)))
				}
				bw = gpu.HostLinkGBps * float64(d.TP)
			}
			t.BandwidthGBs = &bw
		}
		if t.Latency == 0 {
			t.Latency = config.Duration(time.Duration(kind.LatencyUS) * time.Microsecond)
		}
		if t.Eviction == "" {
			t.Eviction = "lru"
		}
	}
	if !d.IsPD() {
		return nil
	}
	if d.KVTransfer == nil {
		x := config.DefaultKVTransfer()
		d.KVTransfer = &x
	}
	x := d.KVTransfer
	if x.BandwidthGBs == nil {
		bw := config.DefaultRDMAGBs * float64(d.TP)
		if x.Link == "nvlink" {
			if gpu == nil || gpu.LinkGBps <= 0 {
				return errors.New(cfg.Where(key("kv_transfer.bandwidth_gb_s"), fmt.Sprintf("the GPU %q has no NVLink bandwidth in its catalogue entry: set it", d.GPU)))
			}
			bw = gpu.LinkGBps * float64(d.TP)
		}
		x.BandwidthGBs = &bw
	}
	if x.Latency == 0 {
		us := config.DefaultRDMALatencyUS
		if x.Link == "nvlink" {
			us = config.DefaultNVLinkLatencyUS
		}
		x.Latency = config.Duration(time.Duration(us) * time.Microsecond)
	}
	if x.MaxQueue == 0 {
		x.MaxQueue = config.DefaultMaxTransferQueue
	}
	if x.NeedsLayers() && x.Layers == 0 {
		if res == nil || res.Roofline == nil || res.Roofline.A.Layers <= 0 {
			return errors.New(cfg.Where(key("kv_transfer.layers"), fmt.Sprintf("the layer count of model %q is unknown (granularity %s, pipelined %v time the transfer per layer): set it", d.Model, x.Granularity, x.Pipelined)))
		}
		x.Layers = res.Roofline.A.Layers
	}
	return nil
}
