package cluster

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/request"
)

// clientGate is the benchmark client's cap on requests in flight (vLLM's
// `bench serve --max-concurrency`, inference-perf's workers ×
// worker_max_concurrency; trace.MetaMaxInFlight): an llm request whose
// time has come is sent when fewer than max requests are in flight, else it
// waits, first come first served, for one to end. It is sent then: its
// arrival_us, TTFT and timeout count from the send, and the wait is its
// client_wait_us. Tool rows are timers of the client, not requests, and
// take no slot. nil when there is no cap: the hooks cost a nil check.
type clientGate struct {
	max, inFlight int
	q             []*request.State // waiting, oldest first from head
	head          int
	closed        bool // the run is finishing: no more sends
}

func newClientGate(max int) *clientGate {
	if max <= 0 {
		return nil
	}
	return &clientGate{max: max}
}

// clientSend reports whether r may go on to the router now; otherwise it
// waits in the client's queue (hook in arrive).
func (c *Cluster) clientSend(r *request.State) bool {
	g := c.client
	if r.ClientSlot {
		return true // sent from the queue, or an admission delay's re-arrival
	}
	if g.inFlight < g.max {
		g.inFlight++
		r.ClientSlot, r.Rare().ClientWait = true, 0
		return true
	}
	r.ClientQueued, r.Rare().ClientWait = true, c.now
	g.q = append(g.q, r)
	return false
}

// clientFree gives r's slot to the oldest waiting request, which is sent at
// once (hook in terminal).
func (c *Cluster) clientFree(r *request.State) {
	g := c.client
	r.ClientSlot = false
	g.inFlight--
	if g.closed {
		return
	}
	for g.head < len(g.q) {
		n := g.q[g.head]
		g.q[g.head] = nil
		g.head++
		if n.Phase == request.Done {
			continue
		}
		n.ClientQueued, n.ClientSlot = false, true
		n.Rare().ClientWait = c.now - n.ClientWait()
		n.Req.ArrivalUS = c.now // the client's clock starts at the send
		g.inFlight++
		c.h.push(c.now, evArrival, -1, n)
		break
	}
	if g.head == len(g.q) {
		g.q, g.head = g.q[:0], 0
	} else if g.head > 1024 && g.head*2 > len(g.q) {
		g.q = append(g.q[:0], g.q[g.head:]...)
		g.head = 0
	}
}

// clientClose stops sending: the run is at its end (hook in Finish).
func (c *Cluster) clientClose() {
	if c.client != nil {
		c.client.closed = true
	}
}

// clientWait is r's client_wait_us: null without a cap, the time still
// waiting for a request never sent.
func (c *Cluster) clientWait(r *request.State) int64 {
	if r.ClientQueued {
		return c.now - r.ClientWait()
	}
	return r.ClientWait()
}

// clientReason explains an unfinished request that never got a slot.
func (c *Cluster) clientReason(r *request.State) string {
	if !r.ClientQueued {
		return ""
	}
	return fmt.Sprintf("waiting for one of the client's %d in-flight slots", c.client.max)
}

// clone copies the gate for a cloned cluster, its queue through m.
func (g *clientGate) clone(m *request.Clone) *clientGate {
	if g == nil {
		return nil
	}
	d := *g
	d.q = make([]*request.State, 0, len(g.q)-g.head)
	for _, r := range g.q[g.head:] {
		d.q = append(d.q, m.Map(r))
	}
	d.head = 0
	return &d
}
