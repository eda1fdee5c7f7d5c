package sched

import "github.com/blis-sim/blis/lib/engine/request"

// waitQueue is a replica's waiting queue. By default a heap: highest
// priority first, then by order (FCFS; a preempted request goes back to the
// front, as in vLLM). With an Order policy (custom) it is a plain slice the
// policy sorts before each step's admissions.
type waitQueue struct {
	h      []*request.State
	custom bool
}

// wless orders the waiting heap. A request holding its KV (loaded from a
// lower tier, or sent by a prefill replica) goes first: the blocks it holds
// would otherwise starve the requests ahead of it.
func wless(a, b *request.State) bool {
	if a.Holder != b.Holder {
		return a.Holder
	}
	return a.Prio > b.Prio || (a.Prio == b.Prio && a.Order < b.Order)
}

func (q *waitQueue) len() int { return len(q.h) }

func (q *waitQueue) peek() *request.State { return q.h[0] }

func (q *waitQueue) push(r *request.State) {
	q.h = append(q.h, r)
	i := len(q.h) - 1
	r.WIdx = int32(i)
	if !q.custom {
		q.up(i)
	}
}

func (q *waitQueue) up(i int) {
	h := q.h
	for i > 0 {
		p := (i - 1) / 2
		if !wless(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		h[i].WIdx, h[p].WIdx = int32(i), int32(p)
		i = p
	}
}

func (q *waitQueue) down(i int) {
	h := q.h
	n := len(h)
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
		h[i].WIdx, h[m].WIdx = int32(i), int32(m)
		i = m
	}
}

func (q *waitQueue) pop() *request.State {
	return q.removeAt(0)
}

// remove takes r out of the queue wherever it is.
func (q *waitQueue) remove(r *request.State) {
	if q.custom {
		q.removeAt(indexOf(q.h, r))
		return
	}
	q.removeAt(int(r.WIdx))
}

func (q *waitQueue) removeAt(i int) *request.State {
	h := q.h
	n := len(h) - 1
	out := h[i]
	if q.custom {
		copy(h[i:], h[i+1:])
		h[n] = nil
		q.h = h[:n]
		out.WIdx = -1
		return out
	}
	h[i] = h[n]
	h[i].WIdx = int32(i)
	h[n] = nil
	q.h = h[:n]
	if i < n {
		q.down(i)
		q.up(i)
	}
	out.WIdx = -1
	return out
}
