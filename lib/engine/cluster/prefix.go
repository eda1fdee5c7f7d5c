package cluster

import "math/bits"

// prefixIndex is a group's global prefix index: which replicas hold each
// prefix-cache key, kept up to date from the replicas' cache and evict
// events (as a real router's KV-event-fed index is). Routing asks it once
// per decision how many leading prompt blocks each candidate holds; the
// cost is the holders of the prompt's leading keys, not replicas × blocks.
//
// With a KV event delay (kv_event_delay) the events reach it that much
// later, as a real router hears them: each is queued with the time it
// becomes known and applied, in order, before the next question, and as
// later events arrive (so the queue holds one delay's worth of events).
type prefixIndex struct {
	byKey map[uint64][]int32 // key -> group positions holding it (groups of more than 64)
	small bool               // at most 64 positions: masks instead of byKey
	masks maskTable          // key -> bit mask of the positions holding it
	delay int64              // µs; 0: events apply at once
	clock *int64             // the cluster's now (when an event happened)
	q     []kvEvent          // events not yet heard, by the time they are (q[qh:])
	qh    int
	// per decision: hits[i] is candidate i's leading cached blocks when
	// stamp[i] == cur.
	stamp   []uint32
	hits    []int32
	touched []int32 // candidates with hits > 0 in the decision in progress
	cur     uint32
	done    bool
}

func newPrefixIndex(n int) *prefixIndex {
	return &prefixIndex{byKey: map[uint64][]int32{}, small: n <= 64, stamp: make([]uint32, n), hits: make([]int32, n)}
}

// kvEvent is a cache or evict event on its way to the router.
type kvEvent struct {
	at    int64 // when the router hears it
	key   uint64
	pos   int32
	evict bool
}

// observer adapts one replica's store events to the index.
type indexObserver struct {
	x   *prefixIndex
	pos int32
}

func (o indexObserver) Cached(key uint64) {
	if o.x.delay > 0 {
		o.x.push(key, o.pos, false)
		return
	}
	o.x.cache(key, o.pos)
}

func (o indexObserver) Evicted(key uint64) {
	if o.x.delay > 0 {
		o.x.push(key, o.pos, true)
		return
	}
	o.x.evict(key, o.pos)
}

func (x *prefixIndex) cache(key uint64, pos int32) {
	if x.small {
		x.masks.set(key, 1<<uint(pos))
		return
	}
	x.byKey[key] = append(x.byKey[key], pos)
}

func (x *prefixIndex) evict(key uint64, pos int32) {
	if x.small {
		x.masks.clear(key, 1<<uint(pos))
		return
	}
	hs := x.byKey[key]
	for i, p := range hs {
		if p == pos {
			hs[i] = hs[len(hs)-1]
			hs = hs[:len(hs)-1]
			break
		}
	}
	if len(hs) == 0 {
		delete(x.byKey, key)
		return
	}
	x.byKey[key] = hs
}

// push queues an event that happened now, heard delay later.
func (x *prefixIndex) push(key uint64, pos int32, evict bool) {
	now := *x.clock
	x.hear(now)
	x.q = append(x.q, kvEvent{at: now + x.delay, key: key, pos: pos, evict: evict})
}

// hear applies the events heard by now.
func (x *prefixIndex) hear(now int64) {
	q := x.q
	h := x.qh
	for h < len(q) && q[h].at <= now {
		if e := &q[h]; e.evict {
			x.evict(e.key, e.pos)
		} else {
			x.cache(e.key, e.pos)
		}
		h++
	}
	if h == len(q) {
		x.q, x.qh = q[:0], 0
		return
	}
	if h > 1024 && h > len(q)/2 {
		n := copy(q, q[h:])
		x.q, h = q[:n], 0
	}
	x.qh = h
}

func (x *prefixIndex) observer(pos int32) indexObserver { return indexObserver{x, pos} }

// begin starts a decision at now: the events heard by then are applied,
// hits are computed on the first question.
func (x *prefixIndex) begin(now int64) {
	if x.qh < len(x.q) {
		x.hear(now)
	}
	x.done = false
}

// cached answers CachedBlocks(i) for the decision in progress.
func (x *prefixIndex) cached(c *Cluster, i int) int {
	x.compute(c)
	if x.stamp[i] != x.cur {
		return 0
	}
	return int(x.hits[i])
}

// holders lists the candidates with at least one cached leading block.
func (x *prefixIndex) holders(c *Cluster) []int32 {
	x.compute(c)
	return x.touched
}

func (x *prefixIndex) compute(c *Cluster) {
	if !x.done {
		x.done = true
		x.cur++
		if x.cur == 0 { // wrapped: clear the stamps
			clear(x.stamp)
			x.cur = 1
		}
		// One key derivation serves the group: the index is only built for
		// groups whose deployments share a block size (see buildGroups).
		g := c.curG
		g.deps[0].keys.Ensure(c.cur)
		x.walk(c.cur.Keys)
	}
}

// walk sets hits for every replica holding a leading run of keys: key j
// extends the run of the replicas that held keys 0..j-1.
func (x *prefixIndex) walk(keys []uint64) {
	x.touched = x.touched[:0]
	if x.small {
		x.walkMasks(keys)
		return
	}
	for j, k := range keys {
		n := 0
		for _, p := range x.byKey[k] {
			if j == 0 {
				x.stamp[p] = x.cur
				x.hits[p] = 1
				x.touched = append(x.touched, p)
				n++
			} else if x.stamp[p] == x.cur && x.hits[p] == int32(j) {
				x.hits[p]++
				n++
			}
		}
		if n == 0 {
			return
		}
	}
}

// clone copies the index for a clone of the cluster whose clock is clock.
// walkMasks is walk over the masks: the run of key j is the positions
// holding keys 0..j, an AND of masks.
func (x *prefixIndex) walkMasks(keys []uint64) {
	var run uint64
	for j, k := range keys {
		m := x.masks.get(k)
		if j == 0 {
			run = m
			for b := m; b != 0; b &= b - 1 {
				p := int32(bits.TrailingZeros64(b))
				x.stamp[p], x.hits[p] = x.cur, 1
				x.touched = append(x.touched, p)
			}
		} else {
			run &= m
			for b := run; b != 0; b &= b - 1 {
				x.hits[bits.TrailingZeros64(b)]++
			}
		}
		if run == 0 {
			return
		}
	}
}

func (x *prefixIndex) clone(clock *int64) *prefixIndex {
	d := &prefixIndex{byKey: make(map[uint64][]int32, len(x.byKey)), stamp: append([]uint32(nil), x.stamp...),
		hits: append([]int32(nil), x.hits...), cur: x.cur, delay: x.delay, clock: clock,
		q: append([]kvEvent(nil), x.q[x.qh:]...), small: x.small, masks: x.masks.clone()}
	for k, v := range x.byKey {
		d.byKey[k] = append([]int32(nil), v...)
	}
	return d
}
