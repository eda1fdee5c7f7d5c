package policy

import "math"

// kvIndex orders a large board's replicas for the weighted router
// (weighted.Route) without scoring each: by load, and within a load by
// the fraction of KV in use as last reported, then index. Its score is
// non-increasing in both, so the best of each load is its first; a
// replica in a span (Board.SetVolatile) has only taken blocks since its
// report, so its reported fraction is a lower bound and the first of a
// load is brought up to date (onRead) before it is believed.
//
// Built on the first weighted decision of a board with a load tree,
// kept by Set and AddInFlight from then on; a clone builds its own.
type kvIndex struct {
	by   [][]int32 // by load: a binary min-heap of replicas on (q, index)
	pos  []int32   // by replica: its position in by[load[i]]
	load []int32   // by replica: the load it is filed under
	q    []float64 // by replica: KVUsed/KVTotal as last reported
	maxL int       // the highest load with replicas (0 when none)
	// totals counts the replicas by KV total: the tie check of
	// weighted.Route asks of each distinct total which fraction comes
	// next; noKV counts those with an unknown total (KVTotal ≤ 0, whose
	// score has no KV term): with any, or many totals, the router scans.
	totals []totalCount
	noKV   int
	// stamp marks the replicas brought up to date in decision seq.
	stamp []uint32
	seq   uint32
}

type totalCount struct {
	t int64
	n int
}

// maxTotals is the number of distinct KV totals up to which the index
// answers (a fleet has one per GPU type).
const maxTotals = 8

func newKVIndex(reps []ReplicaView) *kvIndex {
	n := len(reps)
	x := &kvIndex{pos: make([]int32, n), load: make([]int32, n), q: make([]float64, n), stamp: make([]uint32, n)}
	for i := range reps {
		s := &reps[i].s
		x.count(s.KVTotal, 1)
		x.load[i], x.q[i] = int32(reps[i].Load()), ratio(s)
		x.push(i)
	}
	return x
}

// ratio is the fraction weighted.Route's score reads (0 without a total:
// the score then has no KV term, and the index is not used).
func ratio(s *ReplicaStatus) float64 {
	if s.KVTotal <= 0 {
		return 0
	}
	return float64(s.KVUsed) / float64(s.KVTotal)
}

func (x *kvIndex) count(t int64, d int) {
	if t <= 0 {
		x.noKV += d
		return
	}
	for k := range x.totals {
		if x.totals[k].t == t {
			if x.totals[k].n += d; x.totals[k].n == 0 {
				x.totals = append(x.totals[:k], x.totals[k+1:]...)
			}
			return
		}
	}
	x.totals = append(x.totals, totalCount{t, d})
}

// usable reports whether the index can answer: every total known, few
// distinct.
func (x *kvIndex) usable() bool { return x.noKV == 0 && len(x.totals) <= maxTotals }

// set refiles replica i after its status changed from old to s.
func (x *kvIndex) set(i int, old, s *ReplicaStatus) {
	if old.KVTotal != s.KVTotal {
		x.count(old.KVTotal, -1)
		x.count(s.KVTotal, 1)
	}
	l, q := int32(s.Waiting+s.Running+s.InFlight), ratio(s)
	if l != x.load[i] {
		x.remove(i)
		x.load[i], x.q[i] = l, q
		x.push(i)
		return
	}
	if q != x.q[i] {
		old := x.q[i]
		x.q[i] = q
		if q < old {
			x.up(x.load[i], int(x.pos[i]))
		} else {
			x.down(x.load[i], int(x.pos[i]))
		}
	}
}

func (x *kvIndex) less(a, b int32) bool {
	return x.q[a] < x.q[b] || x.q[a] == x.q[b] && a < b
}

func (x *kvIndex) push(i int) {
	l := int(x.load[i])
	for l >= len(x.by) {
		x.by = append(x.by, nil)
	}
	x.pos[i] = int32(len(x.by[l]))
	x.by[l] = append(x.by[l], int32(i))
	x.up(int32(l), len(x.by[l])-1)
	x.maxL = max(x.maxL, l)
}

func (x *kvIndex) remove(i int) {
	l := x.load[i]
	h := x.by[l]
	p, last := int(x.pos[i]), len(h)-1
	if p != last {
		h[p] = h[last]
		x.pos[h[p]] = int32(p)
	}
	x.by[l] = h[:last]
	if p != last {
		x.down(l, p)
		x.up(l, p)
	}
	for x.maxL > 0 && len(x.by[x.maxL]) == 0 {
		x.maxL--
	}
}

func (x *kvIndex) up(l int32, p int) {
	h := x.by[l]
	for p > 0 {
		u := (p - 1) / 2
		if !x.less(h[p], h[u]) {
			break
		}
		h[p], h[u] = h[u], h[p]
		x.pos[h[p]], x.pos[h[u]] = int32(p), int32(u)
		p = u
	}
}

func (x *kvIndex) down(l int32, p int) {
	h := x.by[l]
	for {
		c := 2*p + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && x.less(h[c+1], h[c]) {
			c++
		}
		if !x.less(h[c], h[p]) {
			return
		}
		h[p], h[c] = h[c], h[p]
		x.pos[h[p]], x.pos[h[c]] = int32(p), int32(c)
		p = c
	}
}

// first is the replica filed first under load l, brought up to date
// (onRead) until the first is current: −1 when none has that load.
func (x *kvIndex) first(b *Board, l int, now int64) int {
	for {
		h := x.by[l]
		if len(h) == 0 {
			return -1
		}
		i := h[0]
		if b.volAt == nil || now < b.volAt[i] || x.stamp[i] == x.seq {
			return int(i)
		}
		x.stamp[i] = x.seq
		b.onRead(int(i)) // reports it: Set refiles it
	}
}

// nextAbove is the smallest fraction u/t above q, over the totals t on
// the board (+Inf when none: q is at least every total's 1).
func (x *kvIndex) nextAbove(q float64) float64 {
	best := math.Inf(1)
	for _, tc := range x.totals {
		t := tc.t
		// The smallest u with float64(u)/float64(t) > q: near q·t, then
		// stepped exactly (the division rounds).
		u := int64(q * float64(t))
		for u > 0 && float64(u-1)/float64(t) > q {
			u--
		}
		for u <= t && float64(u)/float64(t) <= q {
			u++
		}
		if u <= t {
			best = min(best, float64(u)/float64(t))
		}
	}
	return best
}

// kvIndex returns the board's index, built on first use.
func (b *Board) kvIndex() *kvIndex {
	if b.kvx == nil {
		b.kvx = newKVIndex(b.reps)
	}
	return b.kvx
}
