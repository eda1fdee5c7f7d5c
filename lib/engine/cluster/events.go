package cluster

import (
	"github.com/blis-sim/blis/lib/engine/internal/minheap"
	"github.com/blis-sim/blis/lib/engine/request"
)

// Event kinds, in the order they run when they share a timestamp: a step
// ends (freeing KV) before anything arrives, timers fire, the router's view
// is refreshed before it routes, and a step starts only after every
// same-time arrival has reached its queue. A request finishing exactly at
// its deadline completes (step end before timeout).
const (
	evStepEnd    uint8 = iota
	evXferDone         // a P/D KV transfer ends: the prefill replica frees its blocks
	evEncodeDone       // an encode replica's oldest request's embeddings arrive (encode.go)
	evToolDone
	evTimeout
	evGateTTL   // a request's TTL in the gateway queue (flow control)
	evHoldWake  // a request held by the routing policy is due (hold.go)
	evLifecycle // a replica's lifecycle timer (autoscaling): ready, warm, drain timeout
	evScale     // the autoscaler's sampling tick
	evSnapshot  // not an event: the rank at which a periodic router snapshot is taken
	evGateWake  // the gateway's next look at a snapshot view (flow control with snapshot_interval)
	evArrival
	evEnqueue
	evWake // an idle replica's KV load from a lower tier ends
	evStepStart
)

// event has four fields on purpose: Go keeps structs of at most four
// fields in registers (SSA-able), and a fifth made every heap swap a
// typedmemmove with a bulk write barrier (+8% instructions on the run).
type event struct {
	t   int64
	key uint64 // kind<<56 | seq: ties broken by kind, then scheduling order
	tag uint64 // replica index << 32 | the request's Life when scheduled (stale if it changed)
	r   *request.State
}

func (e *event) kind() uint8  { return uint8(e.key >> 56) }
func (e *event) inst() int32  { return int32(e.tag >> 32) }
func (e *event) life() uint32 { return uint32(e.tag) }

func (a *event) Less(b *event) bool {
	return a.t < b.t || (a.t == b.t && a.key < b.key)
}

// eventHeap is the cluster's event queue; seq numbers events as they are
// scheduled, so ties are broken the same way on every run.
type eventHeap struct {
	minheap.Heap[event, *event]
	seq uint64
}

func (h *eventHeap) push(t int64, kind uint8, inst int32, r *request.State) {
	h.seq++
	var life uint32
	if r != nil {
		life = r.Life
	}
	h.Push(event{t: t, key: uint64(kind)<<56 | h.seq, tag: uint64(uint32(inst))<<32 | uint64(life), r: r})
}

// pushGen schedules a replica's lifecycle event: gen (the replica's
// lifecycle generation) takes the place of a request's life, so an event
// left behind by a state change is stale.
func (h *eventHeap) pushGen(t int64, kind uint8, inst int32, gen uint32) {
	h.seq++
	h.Push(event{t: t, key: uint64(kind)<<56 | h.seq, tag: uint64(uint32(inst))<<32 | uint64(gen)})
}

// retireHeap orders finished requests by the root arrival they hang off.
type retireEntry struct{ r *request.State }

func (a *retireEntry) Less(b *retireEntry) bool { return a.r.RootArr < b.r.RootArr }

type retireHeap struct {
	minheap.Heap[retireEntry, *retireEntry]
}
