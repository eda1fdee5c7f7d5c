package engine

import (
	"github.com/blis-sim/blis/lib/trace"
)

// Request lifecycle states.
const (
	stPending  uint8 = iota // waiting for dependencies
	stArriving              // arrival event scheduled
	stRouted                // in the alpha queueing delay
	stWaiting               // in an instance's waiting queue
	stRunning               // in an instance's running set
	stTool                  // a tool timer is running
	stDone                  // terminal; result written
)

// reqState is one request in flight. Pooled: memory grows with requests in
// flight, not with the trace.
type reqState struct {
	req trace.Request
	row int64 // 1-based row in the input, for errors

	state  uint8
	status string
	reason string
	inst   int32

	admitted, routed, enqueued, firstSched, firstTok, finished int64
	preemptions, cachedTok, generated                          int32

	// Dependencies.
	pending  int32       // dependencies not yet finished
	readyAt  int64       // latest dependency finish seen
	children []*reqState // requests waiting on this one
	rootArr  int64       // arrival of the root this request hangs off (streaming retention)
	retired  bool

	// Engine state.
	computed int32 // prompt/recompute tokens whose KV exists
	chunk    int32 // tokens scheduled in the current step
	decoding bool
	s0       int64   // step that completed the prefill (decode start)
	c0       int32   // computed tokens at decode start
	gen0     int32   // generated tokens at decode start
	ids      []int32 // identified blocks (prompt blocks with cache keys), in order
	anon     int32   // anonymous blocks after them
	keys     []uint64
	keysOK   bool
	nreg     int32 // leading blocks already registered in the prefix cache
	prio     int64
	order    int64 // waiting-queue order: enqueue counter, or negative after preemption
	widx     int32 // index in the waiting heap
	// A failed admission stays failed until a block is freed or evicted
	// (a shorter hit takes fewer blocks out of the free queue), the next
	// prompt block becomes cached, or the step has less token budget left (a
	// smaller chunk needs fewer blocks); cache hits taken by others never turn
	// a failure into a success. Skip re-checking it until then.
	failed    bool
	failFree  int32
	failLeft  int32
	failHits  int
	failEvict int64
	epoch     uint32

	rprev, rnext *reqState // running list (admission order)
	lprev, lnext *reqState // live list (registration order)
}

func (r *reqState) reset() {
	*r = reqState{
		ids: r.ids[:0], keys: r.keys[:0], children: r.children[:0], epoch: r.epoch + 1,
		inst: -1, admitted: trace.Null, routed: trace.Null, enqueued: trace.Null,
		firstSched: trace.Null, firstTok: trace.Null, finished: trace.Null, widx: -1,
	}
}

func (r *reqState) numTokens() int32 { return r.req.InputTokens + r.generated }

func (r *reqState) nblocks() int32 { return int32(len(r.ids)) + r.anon }

// idBlocks is how many of n new blocks after the first have carry cache keys.
func (r *reqState) idBlocks(n int32) int32 {
	have := r.nblocks()
	return max(0, min(int32(len(r.keys)), have+n)-have)
}

// waitQueue is an instance's waiting queue: highest priority first, then by
// order (FCFS; a preempted request goes back to the front, as in vLLM).
type waitQueue struct{ h []*reqState }

func wless(a, b *reqState) bool {
	return a.prio > b.prio || (a.prio == b.prio && a.order < b.order)
}

func (q *waitQueue) len() int { return len(q.h) }

func (q *waitQueue) peek() *reqState { return q.h[0] }

func (q *waitQueue) push(r *reqState) {
	q.h = append(q.h, r)
	i := len(q.h) - 1
	r.widx = int32(i)
	q.up(i)
}

func (q *waitQueue) up(i int) {
	h := q.h
	for i > 0 {
		p := (i - 1) / 2
		if !wless(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		h[i].widx, h[p].widx = int32(i), int32(p)
		i = p
	}
}

func (q *waitQueue) pop() *reqState {
	h := q.h
	n := len(h) - 1
	out := h[0]
	h[0] = h[n]
	h[0].widx = 0
	h[n] = nil
	h = h[:n]
	q.h = h
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && wless(h[r], h[l]) {
			m = r
		}
		if !wless(h[m], h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		h[i].widx, h[m].widx = int32(i), int32(m)
		i = m
	}
	out.widx = -1
	return out
}
