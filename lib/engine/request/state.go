// Package request holds the state of one request in flight, shared by the
// rooms of the engine: the cluster owns its lifecycle (dependencies, router,
// timestamps, result), a replica's scheduler its progress and KV.
//
// States are pooled by the cluster: memory grows with requests in flight,
// not with the trace. A pointer to a State is therefore only meaningful
// together with its Epoch, which changes whenever the State stops being
// what an earlier reference meant (finished, preempted, cancelled, reused).
package request

import (
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/trace"
)

// Phase is where a request is in its lifecycle.
type Phase uint8

// Phases, in lifecycle order.
const (
	Pending  Phase = iota // waiting for dependencies
	Arriving              // arrival event scheduled (or delayed by admission)
	Routed                // routed, in the alpha queueing delay
	Waiting               // in a replica's waiting queue
	Running               // in a replica's running set
	Tool                  // a tool timer is running
	Done                  // terminal; result written
	// Transfer: prefilled on a prefill replica, its KV waiting for or in
	// transfer to a decode replica (disaggregated serving).
	Transfer
)

// State is one request in flight.
type State struct {
	// The fields a scheduler touches on every step a decoding request
	// crosses a block boundary come first, together: at 1,000 replicas the
	// live states are tens of MB, and each scattered field was a cache miss.
	Epoch    uint32
	Computed int32 // prompt/recompute tokens whose KV exists
	KV       kv.Handle
	Keys     []uint64 // prefix-cache key per full prompt block (see Keyer)
	KeysB    int32    // block size Keys were derived for; 0 = not derived
	NReg     int32    // leading blocks already registered in the prefix cache
	Chunk    int32    // tokens scheduled in the current step
	Decoding bool

	Req trace.Request
	Row int64 // 1-based row in the input, for errors

	Phase   Phase
	Status  string
	Reason  string
	Replica int32 // cluster-wide replica index, -1 until routed

	Admitted, Routed, Enqueued, FirstSched, FirstTok, Finished int64
	Preemptions, CachedTok, Generated                          int32
	Deadline                                                   int64 // client timeout (absolute µs), trace.Null if none
	// Cancel marks a running request whose client gave up while its
	// replica was mid-step: the scheduler drops it when the step ends.
	Cancel bool

	// Dependencies (owned by the cluster).
	Pending  int32    // dependencies not yet finished
	ReadyAt  int64    // latest dependency finish seen
	Children []*State // requests waiting on this one
	RootArr  int64    // arrival of the root this request hangs off (streaming retention)
	Retired  bool

	// Progress on a replica (owned by its scheduler).
	S0    int64 // step that completed the prefill (decode start)
	C0    int32 // computed tokens at decode start
	Gen0  int32 // generated tokens at decode start
	Prio  int64 // priority in the waiting queue (larger first)
	Order int64 // waiting-queue order: enqueue counter, or negative after preemption
	WIdx  int32 // index in the waiting heap, -1 when not in it
	// A failed admission stays failed until a block is freed or evicted
	// (a shorter hit takes fewer blocks out of the free queue), the next
	// prompt block becomes cached, or the step has less token budget left
	// (a smaller chunk needs fewer blocks); cache hits taken by others never
	// turn a failure into a success. The scheduler skips re-checking it
	// until then.
	Failed    bool
	FailFree  int32
	FailLeft  int32
	FailHits  int
	FailEvict int64
	// Life changes only when the State is reused for another request: an
	// event that names a State with another Life is stale.
	Life uint32

	// Tiered KV (owned by the scheduler): a request loading blocks from
	// lower tiers holds GPU blocks for LoadFrom+LoadN keys; it re-enters the
	// waiting queue at LoadReady.
	Loading   bool
	Holder    bool // waiting with its KV in hand: first in the waiting order
	LoadFrom  int32
	LoadN     int32
	LoadReady int64
	CachedLow [2]int32 // prompt tokens reloaded from the cpu and storage tiers
	ReloadUS  int64    // time from the load's start to its end
	ThrashTok int32    // reloaded tokens whose blocks ping-ponged (see kv.Tiers)

	// Disaggregated serving (owned by the cluster): the prefill replica
	// runs the prompt only (PrefillOnly); XferKV is its blocks there while
	// the KV moves to DReplica, whose blocks are KV. With granularity chunk
	// or stream the decode blocks are reserved while the prefill runs: until
	// its end they are XferKV, and KV is the prefill replica's.
	PrefillOnly bool
	XferQueued  bool  // asked the decode replica for blocks (in its incoming queue or reserved)
	XferTok     int32 // prompt tokens whose KV has been put on the link
	PReplica    int32 // prefill replica, -1 if none
	DReplica    int32 // decode replica, -1 until chosen
	XferKV      kv.Handle
	XferStart   int64 // the prefill's end (before it: when the decode blocks were asked for)
	XferRes     int64 // the decode replica reserved its blocks
	XferBP      int64 // waited for the decode replica's blocks (backpressure)
	XferSendAt  int64 // the link started sending the last piece
	XferFirst   int64 // the link finished sending the last piece's first layer
	XferEnd     int64 // the link finished sending the last piece: the last byte left
	XferReady   int64 // the decode replica may schedule the request (= XferDone unless pipelined)
	XferDone    int64 // the last byte arrived
	XferBytes   int64
	XferWaitUS  int64 // prefill end to the last piece's start (decode blocks, link queue), >= 0

	RPrev, RNext *State // a replica's running list (admission order)
	LPrev, LNext *State // the cluster's live list (registration order)
}

// Reset readies a pooled State for a new request, keeping its buffers.
func (r *State) Reset() {
	*r = State{
		KV:       kv.Handle{IDs: r.KV.IDs[:0]},
		XferKV:   kv.Handle{IDs: r.XferKV.IDs[:0]},
		PReplica: -1, DReplica: -1, XferStart: trace.Null, XferDone: trace.Null,
		Keys:     r.Keys[:0],
		Children: r.Children[:0],
		Epoch:    r.Epoch + 1,
		Life:     r.Life + 1,
		Replica:  -1, Admitted: trace.Null, Routed: trace.Null, Enqueued: trace.Null,
		FirstSched: trace.Null, FirstTok: trace.Null, Finished: trace.Null, Deadline: trace.Null, WIdx: -1,
	}
}

// NumTokens is the tokens whose KV the request needs computed before it can
// decode: its prompt plus what it has generated (recomputed after a
// preemption).
func (r *State) NumTokens() int32 { return r.Req.InputTokens + r.Generated }

// IDBlocks is how many of n new blocks after the ones held carry cache keys.
func (r *State) IDBlocks(n int32) int32 {
	have := r.KV.Blocks()
	return max(0, min(int32(len(r.Keys)), have+n)-have)
}

// Clone copies states and fixes the pointers between them. Every State
// reachable from the structures being cloned must go through Map.
type Clone struct {
	m     map[*State]*State
	order []*State // copies in creation order: Finish walks it
	// Copies and their block ids are carved from slabs: a fork of a
	// cluster with a thousand requests in flight makes two allocations per
	// few hundred states instead of two per state (regret forks clone
	// often).
	slab []State
	ids  []int32
}

// NewClone starts a clone.
func NewClone() *Clone { return &Clone{m: map[*State]*State{}} }

// NewCloneN starts a clone of about n states (sized once).
func NewCloneN(n int) *Clone {
	return &Clone{m: make(map[*State]*State, n), order: make([]*State, 0, n)}
}

// Map returns the copy of r (nil for nil), creating it on first sight.
// Pointer fields of copies are fixed by Finish.
func (c *Clone) Map(r *State) *State {
	if r == nil {
		return nil
	}
	if d, ok := c.m[r]; ok {
		return d
	}
	if len(c.slab) == 0 {
		c.slab = make([]State, max(64, cap(c.order)/4))
	}
	d := &c.slab[0]
	c.slab = c.slab[1:]
	*d = *r
	d.KV.IDs = nil
	if n := len(r.KV.IDs); n > 0 {
		if cap(c.ids)-len(c.ids) < n {
			c.ids = make([]int32, 0, max(4096, n))
		}
		k := len(c.ids)
		c.ids = append(c.ids, r.KV.IDs...)
		d.KV.IDs = c.ids[k : k+n : k+n] // full: an append moves it out
	}
	d.XferKV.IDs = append([]int32(nil), r.XferKV.IDs...)
	d.Keys = append([]uint64(nil), r.Keys...)
	d.Req.DependsOn = append([]string(nil), r.Req.DependsOn...)
	d.Req.PrefixHashes = append([]uint64(nil), r.Req.PrefixHashes...)
	d.Children = append([]*State(nil), r.Children...)
	c.m[r] = d
	c.order = append(c.order, d)
	return d
}

// Finish maps the pointers inside every copy; it may create more copies
// (a child only reachable through its parent), which join the walk.
func (c *Clone) Finish() {
	for i := 0; i < len(c.order); i++ {
		d := c.order[i]
		for k, ch := range d.Children {
			d.Children[k] = c.Map(ch)
		}
		d.RPrev, d.RNext = c.Map(d.RPrev), c.Map(d.RNext)
		d.LPrev, d.LNext = c.Map(d.LPrev), c.Map(d.LNext)
	}
}
