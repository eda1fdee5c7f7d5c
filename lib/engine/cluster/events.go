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

// evq is a binary min-heap of events, written out for event: through
// minheap's generic one, compiled by shape, every Less was an indirect
// call through the instantiation's dictionary, and every level a swap
// (at 12,000 req/s on 1,000 replicas up to ~95 requests wait out their
// queueing delay here, and the generic Pop and Less were 5.7% of the
// engine's instructions; written out, Pop is half that: Less is inlined).
// Elements move into a hole instead; the comparisons, and so the heap's
// layout and order of pops, are the generic heap's.
type evq struct{ S []event }

// Push adds e.
func (q *evq) Push(e event) {
	q.S = append(q.S, e)
	s := q.S
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !e.Less(&s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = e
}

// Pop removes and returns the earliest event; the queue must not be
// empty.
func (q *evq) Pop() event {
	s := q.S
	n := len(s) - 1
	out, last := s[0], s[n]
	s[n] = event{} // no stale State pointer past the end
	s = s[:n]
	if n > 0 {
		i := 0
		for {
			l := 2*i + 1
			if l >= n {
				break
			}
			m := l
			if r := l + 1; r < n && s[r].Less(&s[l]) {
				m = r
			}
			if !s[m].Less(&last) {
				break
			}
			s[i] = s[m]
			i = m
		}
		s[i] = last
	}
	q.S = s
	return out
}

// eventHeap is the cluster's event queue; seq numbers events as they are
// scheduled, so ties are broken the same way on every run. Step ends are
// kept apart (ends): a replica has at most one, which a span cut short
// moves in place (leap.go), so the queue never holds one that is dead.
type eventHeap struct {
	evq  // every other event
	seq  uint64
	ends endHeap
}

// Len is the number of events queued.
func (h *eventHeap) Len() int { return len(h.S) + h.ends.len() }

// next is the time and key of the next event; ok is false when none is
// queued.
func (h *eventHeap) next() (t int64, key uint64, ok bool) {
	if len(h.S) > 0 {
		t, key, ok = h.S[0].t, h.S[0].key, true
	}
	if e := h.ends.top(); e != nil && (!ok || e.t < t || e.t == t && e.key < key) {
		t, key, ok = e.t, e.key, true
	}
	return t, key, ok
}

// pop removes and returns the next event; the queue must not be empty.
func (h *eventHeap) pop() event {
	h.ends.flush()
	if n := len(h.ends.s); n > 0 {
		e := &h.ends.s[0]
		if len(h.S) == 0 || e.t < h.S[0].t || e.t == h.S[0].t && e.key < h.S[0].key {
			ev := event{t: e.t, key: e.key, tag: uint64(uint32(e.rep)) << 32}
			h.ends.hold()
			return ev
		}
	}
	return h.Pop()
}

func (h *eventHeap) push(t int64, kind uint8, inst int32, r *request.State) {
	h.seq++
	var life uint32
	if r != nil {
		life = r.Life
	}
	key := uint64(kind)<<56 | h.seq
	if kind == evStepStart {
		key |= otherStart
	}
	h.Push(event{t: t, key: key, tag: uint64(uint32(inst))<<32 | uint64(life), r: r})
}

// pushStepEnd schedules the end, at t, of replica inst's step of dur µs
// (replacing the end it had: a span cut short). Step ends of one instant
// are ordered by their start, the earlier first (as they were scheduled),
// then by replica: a key that depends on the step alone, so that a span's
// last step end, scheduled when the span began, takes the place the
// step's own end would have had.
func (h *eventHeap) pushStepEnd(t, dur int64, inst int32) {
	h.ends.set(inst, t, stepEndKey(dur, inst))
}

// pushChainStart schedules replica inst's next step at now, after the
// step of dur µs it just ended: such starts run in the order of the step
// ends that queued them, before the starts queued by anything else.
func (h *eventHeap) pushChainStart(t, dur int64, inst int32) {
	h.Push(event{t: t, key: chainStartKey(dur, inst), tag: uint64(uint32(inst)) << 32})
}

// durKeyMax bounds the step duration kept in a key (3.2 days: longer
// steps tie, and are ordered by replica).
const durKeyMax = 1<<38 - 1

func stepEndKey(dur int64, inst int32) uint64 {
	return uint64(evStepEnd)<<56 | (durKeyMax-uint64(min(dur, durKeyMax)))<<17 | uint64(uint32(inst))
}

func chainStartKey(dur int64, inst int32) uint64 {
	return uint64(evStepStart)<<56 | (durKeyMax-uint64(min(dur, durKeyMax)))<<17 | uint64(uint32(inst))
}

// otherStart is the bit that orders a step start queued by anything but
// its replica's own step end after the chained ones of its instant.
const otherStart = 1 << 55

// pushGen schedules a replica's lifecycle event: gen (the replica's
// lifecycle generation) takes the place of a request's life, so an event
// left behind by a change (a provisioning replica cancelled) is stale.
func (h *eventHeap) pushGen(t int64, kind uint8, inst int32, gen uint32) {
	h.seq++
	h.Push(event{t: t, key: uint64(kind)<<56 | h.seq, tag: uint64(uint32(inst))<<32 | uint64(gen)})
}

// clone copies the queue.
func (h *eventHeap) clone(m *request.Clone) eventHeap {
	d := eventHeap{seq: h.seq, ends: h.ends.clone()}
	d.S = make([]event, len(h.S))
	d.ends.flush()
	for i, e := range h.S {
		e.r = m.Map(e.r)
		d.S[i] = e
	}
	return d
}

// endHeap is the step ends: a min-heap with one slot per replica, whose
// position it tracks (pos), so that a replica's end can move.
//
// The end popped last stays at the root, held (gone for every reader),
// until the next change: the replica's next step end, set while its end
// is processed (most often), replaces it in one pass down the heap
// instead of a removal and an insertion.
type endHeap struct {
	s    []endEntry
	pos  []int32 // by replica: index in s, −1 when it has no step end
	held int32   // 1 + the replica whose popped end is held at s[0]; 0: none
}

type endEntry struct {
	t   int64
	key uint64
	rep int32
}

func (a *endEntry) less(b *endEntry) bool { return a.t < b.t || a.t == b.t && a.key < b.key }

// init sizes the heap for n replicas.
func (h *endHeap) init(n int) {
	h.pos = make([]int32, n)
	for i := range h.pos {
		h.pos[i] = -1
	}
}

// at is replica rep's step end (ok false: none).
func (h *endHeap) at(rep int32) (t int64, ok bool) {
	e, ok := h.entry(rep)
	return e.t, ok
}

// entry is replica rep's step end (ok false: none).
func (h *endHeap) entry(rep int32) (e endEntry, ok bool) {
	if p := h.pos[rep]; p >= 0 && h.held != rep+1 {
		return h.s[p], true
	}
	return endEntry{}, false
}

// len is the number of step ends queued.
func (h *endHeap) len() int {
	if h.held != 0 {
		return len(h.s) - 1
	}
	return len(h.s)
}

// top is the earliest step end (nil: none): with the root held, the
// earlier of its children.
func (h *endHeap) top() *endEntry {
	if h.held == 0 {
		if len(h.s) > 0 {
			return &h.s[0]
		}
		return nil
	}
	switch len(h.s) {
	case 1:
		return nil
	case 2:
		return &h.s[1]
	}
	if h.s[2].less(&h.s[1]) {
		return &h.s[2]
	}
	return &h.s[1]
}

// hold takes the root out for readers, leaving it in place (pop).
func (h *endHeap) hold() { h.held = h.s[0].rep + 1 }

// flush removes the held root, if any.
func (h *endHeap) flush() {
	if h.held != 0 {
		rep := h.held - 1
		h.held = 0
		h.remove(rep)
	}
}

// set gives replica rep the step end (t, key).
func (h *endHeap) set(rep int32, t int64, key uint64) {
	if h.held != 0 {
		if h.held == rep+1 {
			// Its popped end, at the root: replaced.
			h.held = 0
			h.s[0] = endEntry{t, key, rep}
			h.down(0)
			return
		}
		h.flush()
	}
	p := h.pos[rep]
	if p < 0 {
		p = int32(len(h.s))
		h.s = append(h.s, endEntry{t, key, rep})
		h.pos[rep] = p
		h.up(int(p))
		return
	}
	e := endEntry{t, key, rep}
	old := h.s[p]
	h.s[p] = e
	if e.less(&old) {
		h.up(int(p))
	} else {
		h.down(int(p))
	}
}

// remove takes replica rep's step end out (none: nothing to do).
func (h *endHeap) remove(rep int32) {
	h.flush()
	if h.pos[rep] < 0 {
		return
	}
	p := int(h.pos[rep])
	n := len(h.s) - 1
	h.pos[rep] = -1
	if p != n {
		h.s[p] = h.s[n]
		h.pos[h.s[p].rep] = int32(p)
	}
	h.s = h.s[:n]
	if p < n {
		h.down(p)
		h.up(p)
	}
}

func (h *endHeap) up(i int) {
	s := h.s
	x := s[i]
	for i > 0 {
		p := (i - 1) / 2
		if !x.less(&s[p]) {
			break
		}
		s[i] = s[p]
		h.pos[s[i].rep] = int32(i)
		i = p
	}
	s[i] = x
	h.pos[x.rep] = int32(i)
}

func (h *endHeap) down(i int) {
	s := h.s
	n := len(s)
	x := s[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].less(&s[l]) {
			m = r
		}
		if !s[m].less(&x) {
			break
		}
		s[i] = s[m]
		h.pos[s[i].rep] = int32(i)
		i = m
	}
	s[i] = x
	h.pos[x.rep] = int32(i)
}

func (h *endHeap) clone() endHeap {
	return endHeap{s: append([]endEntry(nil), h.s...), pos: append([]int32(nil), h.pos...), held: h.held}
}

// retireHeap orders finished requests by the root arrival they hang off.
type retireEntry struct{ r *request.State }

func (a *retireEntry) Less(b *retireEntry) bool { return a.r.RootArr < b.r.RootArr }

type retireHeap struct {
	minheap.Heap[retireEntry, *retireEntry]
}
