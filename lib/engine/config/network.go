package config

import (
	"errors"
	"fmt"
	"math"
)

// Network is the client → gateway link a prompt crosses before it reaches
// the router (off when both RTT and bandwidth are 0). A request's arrival
// at the router is delayed by DelayUS after the client sends it; its
// arrival_us, TTFT and timeout still count from the send.
type Network struct {
	RTT           Duration `yaml:"rtt,omitempty"`             // round-trip time client ↔ gateway
	BandwidthMbps float64  `yaml:"bandwidth_mbps,omitempty"`  // link bandwidth, Mbit/s (0 = no transfer term)
	BytesPerToken float64  `yaml:"bytes_per_token,omitempty"` // prompt bytes per token (0 = 4)
}

// On reports whether the network delays anything.
func (n Network) On() bool { return n.RTT > 0 || n.BandwidthMbps > 0 }

// DelayUS is RTT + input_tokens × bytes_per_token × 8 / bandwidth_mbps µs
// (a bit per µs is a Mbit/s), rounded up.
func (n Network) DelayUS(inputTokens int32) int64 {
	d := n.RTT.US()
	if n.BandwidthMbps > 0 {
		bpt := n.BytesPerToken
		if bpt == 0 {
			bpt = 4
		}
		d += int64(math.Ceil(float64(inputTokens) * bpt * 8 / n.BandwidthMbps))
	}
	return d
}

func (c *Cluster) validateNetwork() error {
	n := c.Network
	switch {
	case n.RTT < 0:
		return errors.New(c.Where("network.rtt", fmt.Sprintf("expected a duration >= 0, found %v", n.RTT)))
	case !(n.BandwidthMbps >= 0) || math.IsInf(n.BandwidthMbps, 1):
		return errors.New(c.Where("network.bandwidth_mbps", fmt.Sprintf("expected Mbit/s >= 0 (0 = no transfer term), found %g", n.BandwidthMbps)))
	case !(n.BytesPerToken >= 0) || n.BytesPerToken > 1e6:
		return errors.New(c.Where("network.bytes_per_token", fmt.Sprintf("expected bytes per token in [0, 1e6] (0 = 4), found %g", n.BytesPerToken)))
	}
	return nil
}
