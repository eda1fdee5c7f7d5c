package cluster

// prefixIndex is a group's global prefix index: which replicas hold each
// prefix-cache key, kept up to date from the replicas' cache and evict
// events (as a real router's KV-event-fed index is). Routing asks it once
// per decision how many leading prompt blocks each candidate holds; the
// cost is the holders of the prompt's leading keys, not replicas × blocks.
type prefixIndex struct {
	byKey map[uint64][]int32 // key -> group positions holding it
	// per decision: hits[i] is candidate i's leading cached blocks when
	// stamp[i] == cur.
	stamp   []uint32
	hits    []int32
	touched []int32 // candidates with hits > 0 in the decision in progress
	cur     uint32
	done    bool
}

func newPrefixIndex(n int) *prefixIndex {
	return &prefixIndex{byKey: map[uint64][]int32{}, stamp: make([]uint32, n), hits: make([]int32, n)}
}

// observer adapts one replica's store events to the index.
type indexObserver struct {
	x   *prefixIndex
	pos int32
}

func (o indexObserver) Cached(key uint64) {
	o.x.byKey[key] = append(o.x.byKey[key], o.pos)
}

func (o indexObserver) Evicted(key uint64) {
	hs := o.x.byKey[key]
	for i, p := range hs {
		if p == o.pos {
			hs[i] = hs[len(hs)-1]
			hs = hs[:len(hs)-1]
			break
		}
	}
	if len(hs) == 0 {
		delete(o.x.byKey, key)
		return
	}
	o.x.byKey[key] = hs
}

func (x *prefixIndex) observer(pos int32) indexObserver { return indexObserver{x, pos} }

// begin starts a decision: hits are computed on the first question.
func (x *prefixIndex) begin() { x.done = false }

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

func (x *prefixIndex) clone() *prefixIndex {
	d := &prefixIndex{byKey: make(map[uint64][]int32, len(x.byKey)), stamp: append([]uint32(nil), x.stamp...),
		hits: append([]int32(nil), x.hits...), cur: x.cur}
	for k, v := range x.byKey {
		d.byKey[k] = append([]int32(nil), v...)
	}
	return d
}
