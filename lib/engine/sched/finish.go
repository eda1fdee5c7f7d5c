package sched

import (
	"math"
	"slices"

	"github.com/blis-sim/blis/lib/engine/request"
)

// finishHeap orders decoding requests by the step they finish at, ties in
// the order they were pushed. At 1,000 replicas a replica's heap is cold at
// each of its step ends, so it is laid out for few cache lines per
// operation: 16-byte entries, four children of a node in one line (a 4-ary
// heap, the root stored at index 3 so that each group of children starts a
// line), half the depth of a binary heap.
//
// Steps are kept mod 2³² and compared by their wrapping difference: every
// entry's step is after the last step completed and at most 2³¹−1 steps
// past the one it was pushed at (an output is at most 2³¹−1 tokens), so
// any two differ by less than 2³¹ and the comparison is exact. Push
// numbers are 32 bits and renumbered, in order, before they wrap.
type finishHeap struct {
	s   []finEntry // s[3:] is the heap (s[3] the root), when not empty
	seq uint32     // push number of the last push
}

type finEntry struct {
	step uint32 // finish step mod 2³²
	seq  uint32
	r    *request.State // nil: stale (forget)
}

// finRoot is the root's index: node i's children are 4i−8 … 4i−5, from
// index 4 on, a line of four 16-byte entries in an allocation that starts
// on a line (sizes of 64 bytes and up in powers of two).
const finRoot = 3

func (a *finEntry) less(b *finEntry) bool {
	d := int32(a.step - b.step)
	return d < 0 || d == 0 && a.seq < b.seq
}

// len is the number of entries, stale ones included.
func (h *finishHeap) len() int { return max(0, len(h.s)-finRoot) }

func (h *finishHeap) push(step int64, r *request.State) {
	if h.seq == math.MaxUint32 {
		h.renumber()
	}
	h.seq++
	if len(h.s) == 0 {
		h.s = make([]finEntry, finRoot, 16)
	}
	h.s = append(h.s, finEntry{step: uint32(step), seq: h.seq, r: r})
	s := h.s
	i := len(s) - 1
	x := s[i]
	for i > finRoot {
		p := (i-finRoot-1)/4 + finRoot
		if !x.less(&s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = x
}

// pop removes the root.
func (h *finishHeap) pop() {
	s := h.s
	n := len(s) - 1
	x := s[n]
	s[n] = finEntry{}
	s = s[:n]
	h.s = s
	if n == finRoot {
		return
	}
	i := finRoot
	for {
		c := 4*(i-finRoot) + finRoot + 1 // first child
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < min(c+4, n); k++ {
			if s[k].less(&s[m]) {
				m = k
			}
		}
		if !s[m].less(&x) {
			break
		}
		s[i] = s[m]
		i = m
	}
	s[i] = x
}

// renumber gives the entries push numbers 1, 2, … in their order, so that
// numbering can go on from there without wrapping.
func (h *finishHeap) renumber() {
	e := h.s[min(finRoot, len(h.s)):]
	idx := make([]int, len(e))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case e[a].less(&e[b]):
			return -1
		case e[b].less(&e[a]):
			return 1
		}
		return 0
	})
	for k, i := range idx {
		e[i].seq = uint32(k + 1)
	}
	h.seq = uint32(len(e))
}

// stepOf is the full step of e, given a step now that differs from it by
// less than 2³¹.
func stepOf(e *finEntry, now int64) int64 {
	return now + int64(int32(e.step-uint32(now)))
}

// popDue returns the next live entry due at or before step, or nil.
func (h *finishHeap) popDue(step int64) *request.State {
	for h.len() > 0 && int32(h.s[finRoot].step-uint32(step)) <= 0 {
		r := h.s[finRoot].r
		h.pop()
		if r != nil {
			return r
		}
	}
	return nil
}

// firstLive is the step of the earliest live entry (stale ones at the top
// are dropped: popDue would skip them), given a step now before it.
func (h *finishHeap) firstLive(now int64) (int64, bool) {
	for h.len() > 0 {
		if e := &h.s[finRoot]; e.r != nil {
			return stepOf(e, now), true
		}
		h.pop()
	}
	return 0, false
}

// forget marks r's entry stale (r leaving before its entry is due).
func (h *finishHeap) forget(r *request.State) {
	for i := range h.s {
		if h.s[i].r == r {
			h.s[i].r = nil
			return
		}
	}
}

// clone copies the heap with each live entry's request mapped; stale
// entries stay in place, so the live ones keep their order.
func (h *finishHeap) clone(c *request.Clone) finishHeap {
	d := finishHeap{s: slices.Clone(h.s), seq: h.seq}
	for i := range d.s {
		if d.s[i].r != nil {
			d.s[i].r = c.Map(d.s[i].r)
		}
	}
	return d
}
