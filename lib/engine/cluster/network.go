package cluster

import (
	"github.com/blis-sim/blis/lib/engine/request"
)

// inTransit delays a request's first arrival by the client → gateway
// transfer of its prompt (config network: RTT + bytes / bandwidth) and
// reports whether it did. The first arrival is the one at the request's
// own arrival_us: a transfer or an admission delay always moves it later.
// The client's clock (arrival_us, TTFT, timeout) starts at the send.
func (c *Cluster) inTransit(r *request.State) bool {
	n := &c.cfg.Network
	if !(n.RTT > 0 || n.BandwidthMbps > 0) || c.now != r.Req.ArrivalUS {
		return false
	}
	d := n.DelayUS(r.Req.InputTokens)
	if d <= 0 {
		return false
	}
	c.h.push(c.now+d, evArrival, -1, r)
	return true
}
