package engine

import (
	"errors"
	"fmt"
	"slices"
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
	if x.BandwidthGBs == nil && !ownLinks(d) {
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

// ownLinks reports whether a pool of P/D deployment d has a GPU or TP of
// its own, so that the link defaults differ between its pools (each gets
// its own, config.Pool.LinkGBs) and the deployment's is left unset.
func ownLinks(d *config.Deployment) bool {
	for _, p := range d.Pools {
		if (p.Role == "prefill" || p.Role == "decode") && (p.GPU != "" || p.TP != 0) {
			return true
		}
	}
	return false
}

// prepareLinks fills each pool's network bandwidth (config.Pool.LinkGBs)
// for KV and embedding transfers: the section's bandwidth_gb_s when given,
// else its link's default for the pool's GPU and TP (rdma: 50 GB/s per
// GPU; nvlink: the GPU's NVLink bandwidth); prefill and decode pools
// follow kv_transfer, encode and monolithic pools encode. It also fills
// the encode section's defaults (embedding bytes: the model's hidden size
// × 2, BF16).
func prepareLinks(cfg *config.Cluster, i int, d *config.Deployment, res *resolve.Resolved) error {
	if !d.IsPD() && !d.HasEncode() {
		return nil
	}
	key := func(k string) string { return cfg.DeploymentKey(i, k) }
	d.Pools = slices.Clone(d.Pools)
	if e := d.Encode; e != nil {
		x := *e
		d.Encode = &x
		if x.BytesPerToken == 0 {
			var a *roofline.Arch
			if res != nil && res.Roofline != nil {
				a = res.Roofline.A
			} else if m, err := roofline.LoadModel(d.Model); err == nil {
				a = m
			}
			if a == nil || a.Hidden <= 0 {
				return errors.New(cfg.Where(key("encode.bytes_per_token"), fmt.Sprintf("the hidden size of model %q is unknown: set the embedding bytes per image token", d.Model)))
			}
			d.Encode.BytesPerToken = float64(a.Hidden) * 2
		}
		if x.Latency == 0 {
			us := config.DefaultRDMALatencyUS
			if x.Link == "nvlink" {
				us = config.DefaultNVLinkLatencyUS
			}
			d.Encode.Latency = config.Duration(time.Duration(us) * time.Microsecond)
		}
	}
	for j := range d.Pools {
		p := &d.Pools[j]
		var link string
		var bw *float64
		switch {
		case (p.Role == "prefill" || p.Role == "decode") && d.KVTransfer != nil:
			// The config's bandwidth, or the default prepareKV filled when
			// the pools share the deployment's hardware (else nil: each
			// pool's own default).
			link, bw = d.KVTransfer.Link, d.KVTransfer.BandwidthGBs
		case d.Encode != nil:
			link, bw = d.Encode.Link, d.Encode.BandwidthGBs
		default:
			continue
		}
		if bw != nil {
			p.LinkGBs = *bw
			continue
		}
		tp, name := d.TP, d.GPU
		if p.TP != 0 {
			tp = p.TP
		}
		if p.GPU != "" {
			name = p.GPU
		}
		p.LinkGBs = config.DefaultRDMAGBs * float64(tp)
		if link == "nvlink" {
			g, err := roofline.LoadGPU(name)
			if err != nil || g.LinkGBps <= 0 {
				return errors.New(cfg.Where(key(fmt.Sprintf("pools[%d].gpu", j)), fmt.Sprintf("the GPU %q has no NVLink bandwidth in its catalogue entry: set the transfer's bandwidth_gb_s", name)))
			}
			p.LinkGBs = g.LinkGBps * float64(tp)
		}
	}
	return nil
}
