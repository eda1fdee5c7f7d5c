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

// minHeap is a binary min-heap of values ordered by their less method: no
// interface calls, no per-item allocation. Each instantiation is compiled
// for its own element type, so less is called directly.
type minHeap[T any, P interface {
	*T
	less(*T) bool
}] struct{ s []T }

func (h *minHeap[T, P]) len() int { return len(h.s) }

func (h *minHeap[T, P]) top() *T { return &h.s[0] }

func (h *minHeap[T, P]) push(x T) {
	h.s = append(h.s, x)
	s := h.s
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !P(&s[i]).less(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *minHeap[T, P]) pop() T {
	s := h.s
	n := len(s) - 1
	out := s[0]
	var zero T
	s[0], s[n] = s[n], zero
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && P(&s[r]).less(&s[l]) {
			m = r
		}
		if !P(&s[m]).less(&s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	h.s = s
	return out
}

// eventHeap is the cluster's event queue; seq numbers events as they are
// scheduled, so ties are broken the same way on every run.
type eventHeap struct {
	minHeap[event, *event]
	seq uint64
}

func (h *eventHeap) push(t int64, kind uint8, inst int32, r *reqState) {
	h.seq++
	h.minHeap.push(event{t: t, key: uint64(kind)<<56 | h.seq, inst: inst, r: r})
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

func (a *stepEntry) less(b *stepEntry) bool {
	return a.step < b.step || (a.step == b.step && a.seq < b.seq)
}

type stepHeap struct {
	minHeap[stepEntry, *stepEntry]
	seq uint64
}

func (h *stepHeap) push(step int64, r *reqState) {
	h.seq++
	h.minHeap.push(stepEntry{step: step, seq: h.seq, epoch: r.epoch, r: r})
}

// popDue returns the next live entry due at or before step, or nil.
func (h *stepHeap) popDue(step int64) *reqState {
	for h.len() > 0 && h.s[0].step <= step {
		x := h.pop()
		if x.epoch == x.r.epoch {
			return x.r
		}
	}
	return nil
}
