package cluster

import (
	"github.com/blis-sim/blis/lib/engine/request"
)

// What a real-time driver (lib/serve: the simulator behind an HTTP
// endpoint) needs beyond a table's replay: when to wake up next, and a
// client that gives up before its request ends.

// NextEventUS is the simulated time of the next event to process
// (math.MaxInt64 when none is queued).
func (c *Cluster) NextEventUS() int64 {
	if c.hasStash {
		return c.stashed.t
	}
	t := c.nextLeapEvent() // a span's steps are events to a real-time driver
	if next, _, ok := c.h.next(); ok {
		t = min(t, next)
	}
	return t
}

// Cancel ends request id at t (at least Now) as a client that gives up
// does: a timeout event at t takes it off its replica (status timed_out,
// the tokens of the steps completed before t counted). It reports false
// when the cluster no longer holds the request or it has already ended.
func (c *Cluster) Cancel(id string, t int64) bool {
	r := c.ids.get(id)
	if r == nil || r.Phase == request.Done || r.Phase == request.Pending {
		return false
	}
	c.h.push(max(t, c.now), evTimeout, -1, r)
	return true
}
