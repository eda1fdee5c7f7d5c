package engine

// Event kinds, in the order they run when they share a timestamp: a step
// ends (freeing KV) before anything arrives, the router's view is refreshed
// before it routes, and a step starts only after every same-time arrival has
// reached its queue.
const (
	evStepEnd uint8 = iota
	evToolDone
	evSnapshot // not an event: the rank at which a periodic router snapshot is taken
	evArrival
	evEnqueue
	evStepStart
)

type event struct {
	t    int64
	key  uint64 // kind<<56 | seq: ties broken by kind, then scheduling order
	inst int32
	r    *reqState
}

func (e *event) kind() uint8 { return uint8(e.key >> 56) }

func (a *event) less(b *event) bool {
	return a.t < b.t || (a.t == b.t && a.key < b.key)
}

// eventHeap is a binary min-heap of values: no interface calls, no
// per-event allocation.
type eventHeap struct {
	ev  []event
	seq uint64
}

func (h *eventHeap) push(t int64, kind uint8, inst int32, r *reqState) {
	h.seq++
	h.ev = append(h.ev, event{t: t, key: uint64(kind)<<56 | h.seq, inst: inst, r: r})
	ev := h.ev
	i := len(ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !ev[i].less(&ev[p]) {
			break
		}
		ev[i], ev[p] = ev[p], ev[i]
		i = p
	}
}

func (h *eventHeap) len() int { return len(h.ev) }

func (h *eventHeap) top() *event { return &h.ev[0] }

func (h *eventHeap) pop() event {
	ev := h.ev
	n := len(ev) - 1
	out := ev[0]
	ev[0] = ev[n]
	ev[n] = event{}
	ev = ev[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && ev[r].less(&ev[l]) {
			m = r
		}
		if !ev[m].less(&ev[i]) {
			break
		}
		ev[i], ev[m] = ev[m], ev[i]
		i = m
	}
	h.ev = ev
	return out
}

// stepHeap orders per-instance due work by step index (decode finishes,
// KV block boundaries). Entries carry the request's epoch so that a
// preempted or finished request's stale entries are skipped.
type stepEntry struct {
	step  int64
	seq   uint64
	epoch uint32
	r     *reqState
}

type stepHeap struct {
	e   []stepEntry
	seq uint64
}

func (h *stepHeap) push(step int64, r *reqState) {
	h.seq++
	h.e = append(h.e, stepEntry{step: step, seq: h.seq, epoch: r.epoch, r: r})
	e := h.e
	i := len(e) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !(e[i].step < e[p].step || (e[i].step == e[p].step && e[i].seq < e[p].seq)) {
			break
		}
		e[i], e[p] = e[p], e[i]
		i = p
	}
}

// popDue returns the next live entry due at or before step, or nil.
func (h *stepHeap) popDue(step int64) *reqState {
	for len(h.e) > 0 && h.e[0].step <= step {
		x := h.pop()
		if x.epoch == x.r.epoch {
			return x.r
		}
	}
	return nil
}

func (h *stepHeap) pop() stepEntry {
	e := h.e
	n := len(e) - 1
	out := e[0]
	e[0] = e[n]
	e[n] = stepEntry{}
	e = e[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && (e[r].step < e[l].step || (e[r].step == e[l].step && e[r].seq < e[l].seq)) {
			m = r
		}
		if !(e[m].step < e[i].step || (e[m].step == e[i].step && e[m].seq < e[i].seq)) {
			break
		}
		e[i], e[m] = e[m], e[i]
		i = m
	}
	h.e = e
	return out
}
