package kv

import (
	"fmt"
	"math"
)

// Offload policies: when a block is copied from the GPU to the first
// lower tier.
const (
	OffloadLazy      uint8 = iota // as the GPU evicts it (write-back)
	OffloadEager                  // as it is cached (write-through)
	OffloadThreshold              // eagerly while GPU use >= Threshold, else lazily
)

// Eviction orders of a lower tier.
const (
	EvictLRU uint8 = iota
	EvictLFU
	EvictPriority // lowest priority of the request that cached it first, LRU among equals
)

// ThrashWindowUS is how soon a block reloaded again after being evicted
// from the GPU since its previous reload counts as thrashing (ping-pong
// between tiers).
const ThrashWindowUS = 1_000_000

// TierSpec is one lower tier of a replica.
type TierSpec struct {
	Name      string
	Blocks    int32   // capacity
	BytesUS   float64 // bandwidth to the GPU, bytes per µs
	LatencyUS int64   // per transfer
	Eviction  uint8
}

// TierStats counts a tier's traffic.
type TierStats struct {
	Offloads   int64 // blocks copied in
	Loads      int64 // blocks copied to the GPU
	Evictions  int64 // blocks dropped (or moved down) to make room
	ThrashLoad int64 // loads that were thrashing (ThrashWindowUS)
	LoadUS     int64 // time its link spent loading
	OffloadUS  int64 // time its link spent copying blocks in
}

// Tier is one lower KV tier of a replica: a set of block keys with a
// capacity, an eviction order and a link to the GPU. Entries live in slots
// (the key index maps a key to its slot, touched only on insert and evict);
// the eviction order is a min-heap of slots on (a, b): a is 0 (LRU), the
// use count (LFU) or the priority; b the last use.
type Tier struct {
	Spec     TierSpec
	pos      keyTable // key → slot (grows with the entries)
	slots    []tierEnt
	freeSlot []int32
	h        []int32 // heap of slots (LFU, priority)
	n        int32   // entries held
	// LRU (the default) is a list of slots, least recently used first:
	// O(1) per touch instead of a heap's O(log n) of cache misses.
	lru        bool
	head, tail int32
	// linkFree: the tier's link is busy until then. Copies in (offloads)
	// and out (reloads) share it, first come first served: a burst of
	// offloads delays the reloads queued behind it.
	linkFree int64
	pend     int32 // blocks copied in at the current time, not yet on the link
	Stats    TierStats
	rates    rateWin
}

// rateWin measures a tier's offload and reload rates over windows of at
// least RateWindowUS, each divided by the time it actually spanned.
type rateWin struct {
	start, off0, load0 int64
	off, load          float64
	started            bool
}

// RateWindowUS is the shortest window a tier's rates are measured over.
const RateWindowUS = 1_000_000

// Rates are the blocks per second copied into the tier and loaded out of
// it over the last window of at least RateWindowUS ended by now (0 until
// one has ended): what a replica's metrics endpoint would report.
func (t *Tier) Rates(now int64) (offload, reload float64) {
	w := &t.rates
	if !w.started {
		w.start, w.off0, w.load0, w.started = now, t.Stats.Offloads, t.Stats.Loads, true
	}
	if el := now - w.start; el >= RateWindowUS {
		sec := float64(el) / 1e6
		w.off, w.load = float64(t.Stats.Offloads-w.off0)/sec, float64(t.Stats.Loads-w.load0)/sec
		w.start, w.off0, w.load0 = now, t.Stats.Offloads, t.Stats.Loads
	}
	return w.off, w.load
}

type tierEnt struct {
	key              uint64
	a, b             int64
	loadedAt, evicAt int64 // last reload to the GPU, last GPU eviction seen
	hpos             int32 // heap position (LFU, priority)
	prev, next       int32 // LRU list neighbours (-1 at the ends)
}

func (t *Tier) less(i, j int) bool {
	x, y := &t.slots[t.h[i]], &t.slots[t.h[j]]
	return x.a < y.a || (x.a == y.a && x.b < y.b)
}

func (t *Tier) swap(i, j int) {
	t.h[i], t.h[j] = t.h[j], t.h[i]
	t.slots[t.h[i]].hpos = int32(i)
	t.slots[t.h[j]].hpos = int32(j)
}

func (t *Tier) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *Tier) down(i int) {
	n := len(t.h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}

// Len is the blocks the tier holds.
func (t *Tier) Len() int32 { return t.n }

func (t *Tier) unlink(sl int32) {
	e := &t.slots[sl]
	if e.prev >= 0 {
		t.slots[e.prev].next = e.next
	} else {
		t.head = e.next
	}
	if e.next >= 0 {
		t.slots[e.next].prev = e.prev
	} else {
		t.tail = e.prev
	}
}

func (t *Tier) pushBack(sl int32) {
	e := &t.slots[sl]
	e.prev, e.next = t.tail, -1
	if t.tail >= 0 {
		t.slots[t.tail].next = sl
	} else {
		t.head = sl
	}
	t.tail = sl
}

// touch moves slot sl after a use (its a/b were updated).
func (t *Tier) touch(sl int32) {
	if t.lru {
		if t.tail != sl {
			t.unlink(sl)
			t.pushBack(sl)
		}
		return
	}
	t.down(int(t.slots[sl].hpos))
}

// Has reports whether the tier holds key.
func (t *Tier) Has(key uint64) bool { _, ok := t.pos.get(key); return ok }

// popMin removes the eviction victim and returns its key.
func (t *Tier) popMin() uint64 {
	var sl int32
	if t.lru {
		sl = t.head
		t.unlink(sl)
	} else {
		sl = t.h[0]
		last := len(t.h) - 1
		t.swap(0, last)
		t.h = t.h[:last]
		if last > 0 {
			t.down(0)
		}
	}
	t.n--
	key := t.slots[sl].key
	t.pos.del(key, sl)
	t.freeSlot = append(t.freeSlot, sl)
	return key
}

// insert adds e (not present) to the tier, which has room.
func (t *Tier) insert(e tierEnt) {
	var sl int32
	if n := len(t.freeSlot); n > 0 {
		sl = t.freeSlot[n-1]
		t.freeSlot = t.freeSlot[:n-1]
	} else {
		t.slots = append(t.slots, tierEnt{})
		sl = int32(len(t.slots) - 1)
	}
	t.slots[sl] = e
	t.pos.put(e.key, sl)
	t.n++
	if t.lru {
		t.pushBack(sl)
		return
	}
	t.slots[sl].hpos = int32(len(t.h))
	t.h = append(t.h, sl)
	t.up(len(t.h) - 1)
}

// Tiers is a replica's lower tiers, top down (cpu, then storage, say). It hears the GPU
// store's cache and evict events (as its lower Observer) and copies
// blocks down by the offload policy; the scheduler asks it for prefix hits
// below the GPU and for the time their load takes.
type Tiers struct {
	T          []*Tier
	Policy     uint8
	Threshold  float64
	BlockBytes float64
	gpu        Store
	now        int64
	prio       float64 // priority of the request whose blocks are being cached
	seq        int64
	pending    bool // some tier has copies in waiting for its link (flush)
}

// NewTiers returns empty tiers below gpu.
func NewTiers(specs []TierSpec, policy uint8, threshold, blockBytes float64, gpu Store) *Tiers {
	ts := &Tiers{Policy: policy, Threshold: threshold, BlockBytes: blockBytes, gpu: gpu}
	for _, s := range specs {
		ts.T = append(ts.T, &Tier{Spec: s, pos: newKeyTable(min(s.Blocks, 1<<12)), lru: s.Eviction == EvictLRU, head: -1, tail: -1})
	}
	return ts
}

// SetNow tells the tiers the time of the scheduler call that follows, and
// the priority of the request it concerns. The blocks copied in at the
// previous time go on their links first.
func (ts *Tiers) SetNow(now int64, prio float64) {
	if ts.pending {
		ts.flush()
	}
	ts.now, ts.prio = now, prio
}

// flush puts the blocks copied into each tier at ts.now on the tier's
// link as one transfer: latency + bytes / bandwidth, behind what the link
// already carries.
func (ts *Tiers) flush() {
	ts.pending = false
	for _, t := range ts.T {
		if t.pend == 0 {
			continue
		}
		start := max(ts.now, t.linkFree)
		dur := t.Spec.LatencyUS + int64(math.Ceil(float64(t.pend)*ts.BlockBytes/t.Spec.BytesUS))
		t.linkFree = start + dur
		t.Stats.OffloadUS += dur
		t.pend = 0
	}
}

// Cached implements Observer: eager (or threshold above its use) copies a
// block down as it is cached.
func (ts *Tiers) Cached(key uint64) {
	switch ts.Policy {
	case OffloadEager:
	case OffloadThreshold:
		if float64(ts.gpu.Used()) < ts.Threshold*float64(ts.gpu.Total()) {
			return
		}
	default:
		return
	}
	ts.put(0, key, false)
}

// Evicted implements Observer: the GPU reuses a cached block; lazy and
// threshold copy it down (eager already has).
func (ts *Tiers) Evicted(key uint64) {
	if ts.Policy == OffloadEager {
		if sl, ok := ts.T[0].pos.get(key); ok {
			ts.T[0].slots[sl].evicAt = ts.now
		}
		return
	}
	ts.put(0, key, true)
}

// put copies key into tier i (a block already there is only touched),
// making room by evicting its victim into tier i+1.
func (ts *Tiers) put(i int, key uint64, evicted bool) {
	t := ts.T[i]
	ts.seq++
	if sl, ok := t.pos.get(key); ok {
		e := &t.slots[sl]
		e.b = ts.seq
		if evicted {
			e.evicAt = ts.now
		}
		t.touch(sl)
		return
	}
	if t.Len() >= t.Spec.Blocks {
		v := t.popMin()
		t.Stats.Evictions++
		if i+1 < len(ts.T) {
			ts.put(i+1, v, true)
		}
	}
	e := tierEnt{key: key, b: ts.seq, loadedAt: math.MinInt64, evicAt: math.MinInt64}
	switch t.Spec.Eviction {
	case EvictLFU:
		e.a = 1
	case EvictPriority:
		e.a = prioKey(ts.prio)
	}
	if evicted {
		e.evicAt = ts.now
	}
	t.Stats.Offloads++
	t.pend++
	ts.pending = true
	t.insert(e)
}

// Lookup counts the keys from keys[from] on, up to keys[max-1], found
// consecutively in some lower tier.
func (ts *Tiers) Lookup(keys []uint64, from, max int) int {
	n := 0
	for i := from; i < max && i < len(keys); i++ {
		found := false
		for _, t := range ts.T {
			if t.Has(keys[i]) {
				found = true
				break
			}
		}
		if !found {
			break
		}
		n++
	}
	return n
}

// Load starts loading keys (all found by Lookup) to the GPU at now: each
// tier's blocks go as one transfer on its link (FIFO behind earlier
// loads and offloads), taking latency + bytes / bandwidth. It counts the
// blocks per tier into per (one entry per tier, zeroed first) and returns
// when the last block arrives and how many loads were thrashing.
func (ts *Tiers) Load(keys []uint64, now int64, per []int32) (ready int64, thrash int32) {
	if ts.pending {
		ts.flush() // copies in made before this load go first
	}
	clear(per)
	ready = now
	for _, k := range keys {
		for ti, t := range ts.T {
			sl, ok := t.pos.get(k)
			if !ok {
				continue
			}
			per[ti]++
			e := &t.slots[sl]
			if e.loadedAt != math.MinInt64 && e.evicAt > e.loadedAt && now-e.loadedAt < ThrashWindowUS {
				thrash++
				t.Stats.ThrashLoad++
			}
			e.loadedAt = now
			ts.seq++
			e.b = ts.seq
			if t.Spec.Eviction == EvictLFU {
				e.a++
			}
			t.touch(sl)
			break
		}
	}
	for ti, t := range ts.T {
		if per[ti] == 0 {
			continue
		}
		start := max(now, t.linkFree)
		dur := t.Spec.LatencyUS + int64(math.Ceil(float64(per[ti])*ts.BlockBytes/t.Spec.BytesUS))
		t.linkFree = start + dur
		t.Stats.Loads += int64(per[ti])
		t.Stats.LoadUS += dur
		ready = max(ready, start+dur)
	}
	return ready, thrash
}

// Check verifies tier conservation: held + free = capacity, the index and
// the heap agree, and the heap is ordered.
func (ts *Tiers) Check() error {
	for _, t := range ts.T {
		held := t.Len()
		if free := t.Spec.Blocks - held; held < 0 || free < 0 || held+free != t.Spec.Blocks {
			return fmt.Errorf("%s tier: %d held + %d free != %d capacity", t.Spec.Name, held, free, t.Spec.Blocks)
		}
		if int(t.n)+len(t.freeSlot) != len(t.slots) || t.pos.n != int(t.n) {
			return fmt.Errorf("%s tier: %d held (%d indexed) + %d free slots != %d", t.Spec.Name, t.n, t.pos.n, len(t.freeSlot), len(t.slots))
		}
		if t.lru {
			var k int32
			prev := int32(-1)
			for sl := t.head; sl >= 0; sl = t.slots[sl].next {
				if p, _ := t.pos.get(t.slots[sl].key); t.slots[sl].prev != prev || p != sl {
					return fmt.Errorf("%s tier: LRU list broken at slot %d", t.Spec.Name, sl)
				}
				prev = sl
				k++
			}
			if k != t.n || prev != t.tail {
				return fmt.Errorf("%s tier: LRU list holds %d of %d entries", t.Spec.Name, k, t.n)
			}
			continue
		}
		for i, sl := range t.h {
			if p, ok := t.pos.get(t.slots[sl].key); !ok || p != sl || int(t.slots[sl].hpos) != i {
				return fmt.Errorf("%s tier: entry %d not indexed", t.Spec.Name, i)
			}
			if i > 0 && t.less(i, (i-1)/2) {
				return fmt.Errorf("%s tier: eviction order broken at %d", t.Spec.Name, i)
			}
		}
	}
	return nil
}

// Clone copies the tiers below gpu (the clone of their store).
func (ts *Tiers) Clone(gpu Store) *Tiers {
	d := *ts
	d.gpu = gpu
	d.T = make([]*Tier, len(ts.T))
	for i, t := range ts.T {
		x := *t
		x.h = append([]int32(nil), t.h...)
		x.slots = append([]tierEnt(nil), t.slots...)
		x.freeSlot = append([]int32(nil), t.freeSlot...)
		x.pos = t.pos.clone()
		d.T[i] = &x
	}
	return &d
}

// prioKey maps a priority score to an int64 in the same order (the
// eviction heap's keys are integers): IEEE 754 bits, negatives flipped.
func prioKey(p float64) int64 {
	b := int64(math.Float64bits(p))
	if b < 0 {
		b ^= math.MaxInt64
	}
	return b
}
