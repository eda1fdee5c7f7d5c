package kv

import (
	"fmt"
	"unsafe"

	"github.com/blis-sim/blis/lib/rng"
)

// kvCache is one replica's paged KV cache with prefix caching, after vLLM
// v1's block pool: blocks whose reference count drops to zero go to the tail
// of a free queue but keep their hash, so a later request with the same
// prefix can take them back; allocation takes from the head (least recently
// freed), evicting the hash it held.
//
// A cached block is found from the block holding its chain's previous key
// (next), and only a chain's first block, or one whose predecessor has a
// continuation already, is in the key index (Register): a prompt of
// unshared blocks is one index entry, not one a block.
//
// Only blocks that hold (or will hold) a prefix-cache key have an identity
// (an id); every other block is anonymous and counted, and consecutive
// anonymous blocks in the free queue are one run. The queue order is exactly
// vLLM's, but a request without prefix hashes allocates and frees in O(1)
// per call instead of touching one block struct per block.
//
// A Unique handle (its request's first key is no other request's, so no
// other request can hit its blocks) keeps a record only for its first keyed
// block, in a store set private (SetPrivate) that nobody observes: the others are placeholders in its
// IDs (unreg, then reg once registered), counted with the anonymous blocks
// in use, and on release they join the free queue as one private run, a
// count of cached blocks in the order Release would have queued them. The
// first block stays indexed (privBit), so that another request finding its
// key reports the broken promise (Clash) instead of missing silently.
// Queue order, free counts and evictions are exactly those of records; the
// saving is the per-block records, links and queue entries, which at fleet
// scale are cold memory touched at allocation, registration and release.
//
// The fields a decode step reads (counts, the free queue's head, whether
// anyone observes) come first, in the struct's first cache line: at 1,000
// replicas a replica's cache is cold at each of its events. The struct is
// 256 bytes, a size class whose objects start on a line.
type Paged struct {
	blockSize int32
	total     int32
	free      int32  // blocks in the free queue
	anonUsed  int32  // anonymous blocks held by requests
	idsHeld   int32  // identified blocks with references
	qbase     uint32 // position of q[0] among all entries ever queued, mod 2^32
	qh        int
	q         []qent // free queue from q[qh]
	observed  bool   // obs or low is set
	obs       Observer
	low       Observer // lower KV tiers (nil: GPU only)
	evictions int64
	b         []block
	next      []int32 // next[id]: the block continuing id's chain (a hint: -1, or checked by holds)
	idFree    []int32 // created ids holding nothing
	idx       blockIndex
	nHashed   int32  // blocks holding a key
	nIndexed  int32  // of those, in the index
	nLoose    int32  // of those, not a chain's first block
	sink      uint32 // what touchRecords read (kept so the reads stay)
	hasPrev   int32  // the block Has last found holding the key before the one asked about
	nRun      int32  // blocks in the free queue's private runs (unique)
	clashed   bool   // a Unique handle's first key was found shared (clash)
	private   bool   // SetPrivate
	uniq      bool   // private and not observed: Unique handles keep private blocks
	clash     uint64 // that key
}

// qent is a free-queue entry: a cached block (id >= 0, n its qIndexed and
// qLoose flags, so that evicting it need not read its record), n anonymous
// blocks (id anonRun), n cached blocks of a Unique handle's (id privRun) or
// nothing (id taken: a cache hit took its block back).
type qent struct {
	id int32
	n  int32
}

const (
	qIndexed = 1
	qLoose   = 2
)

const (
	anonRun = -1
	taken   = -2
	privRun = -3
)

// Placeholders in a Unique handle's IDs for its keyed blocks after the
// first: not registered yet, or registered (holding their key privately).
const (
	unreg = -1
	reg   = -2
)

// block is one identified KV block, 16 bytes: a full cache holds a record
// per block on every replica of a fleet, and at fleet scale every first
// touch of a record misses the processor's caches.
//
// A block with references holds key iff hashedBit is set. A block without
// references holds it iff it is also in the free queue (queued): Alloc
// evicts the head block without reading its record (cold: the queue is in
// LRU order), so a block evicted and not yet reused (in idFree) keeps a
// stale hashedBit. Its entry was the only one naming it in the queue, and
// it is named again only after it is reused (its record rewritten), so
// qpos cannot point at an entry naming it, however far it wrapped.
type block struct {
	key  uint64
	qpos uint32 // its free-queue entry's position (as qbase) while queued
	refs uint32 // references, and the flags below
}

const (
	hashedBit  = 1 << 31 // the block holds key
	indexedBit = 1 << 30 // key is in the index (its chain's first block, or a loose one)
	looseBit   = 1 << 29 // indexed though not its chain's first block
	privBit    = 1 << 28 // a Unique handle's first block: its chain's other blocks have no records
	refMask    = 1<<28 - 1
)

func (b *block) hashed() bool  { return b.refs&hashedBit != 0 }
func (b *block) refcnt() int32 { return int32(b.refs & refMask) }

// qflags are b's flags as its free-queue entry keeps them.
func (b *block) qflags() int32 {
	var f int32
	if b.refs&indexedBit != 0 {
		f |= qIndexed
	}
	if b.refs&looseBit != 0 {
		f |= qLoose
	}
	return f
}

// queued reports whether block id (without references) is in the free
// queue.
func (c *Paged) queued(id int32) bool {
	i := int(c.b[id].qpos - c.qbase)
	return i >= c.qh && i < len(c.q) && c.q[i].id == id
}

// holds reports whether block id holds key k.
func (c *Paged) holds(id int32, k uint64) bool {
	bl := &c.b[id]
	return bl.key == k && bl.hashed() && (bl.refcnt() > 0 || c.queued(id))
}

// live reports whether block id holds a key.
func (c *Paged) live(id int32) bool {
	bl := &c.b[id]
	return bl.hashed() && (bl.refcnt() > 0 || c.queued(id))
}

// compact drops the queue's consumed head once it is most of the queue.
func (c *Paged) compact() {
	if c.qh > 4096 && c.qh > len(c.q)/2 {
		m := copy(c.q, c.q[c.qh:])
		c.q = c.q[:m]
		c.qbase += uint32(c.qh)
		c.qh = 0
	}
}

// NewPaged returns an empty cache of blocks blocks of blockSize tokens.
func NewPaged(blocks int32, blockSize int32) *Paged {
	// Block structs are created as ids are first needed: a run without
	// prefix hashes never allocates them.
	c := &Paged{blockSize: blockSize, total: blocks, free: blocks, idx: newBlockIndex(blocks), hasPrev: -1}
	if blocks > 0 {
		c.q = append(c.q, qent{id: anonRun, n: blocks})
	}
	return c
}

// BlockSize implements Store.
func (c *Paged) BlockSize() int32 { return c.blockSize }

// Total implements Store.
func (c *Paged) Total() int32 { return c.total }

// Free implements Store.
func (c *Paged) Free() int32 { return c.free }

// Used implements Store.
func (c *Paged) Used() int32 { return c.total - c.free }

// Evictions implements Store: cached blocks reused for other content.
func (c *Paged) Evictions() int64 { return c.evictions }

// CleanFree implements Store: the anonymous blocks queued ahead of the
// first cached one, counted over the first 256 queue entries at most (a
// lower bound: entries taken back by cache hits are skipped).
func (c *Paged) CleanFree() int32 {
	var n int32
	for i := c.qh; i < len(c.q) && i < c.qh+256; i++ {
		e := c.q[i]
		if e.id == anonRun {
			n += e.n
			continue
		}
		if e.id >= 0 || e.id == privRun {
			break // a cached block: the next Alloc past here evicts it
		}
	}
	return n
}

// AnonHead implements Store.
func (c *Paged) AnonHead() int32 {
	if c.qh < len(c.q) && c.q[c.qh].id == anonRun {
		return c.q[c.qh].n
	}
	return 0
}

// TakeAnon implements Store.
func (c *Paged) TakeAnon(n int32) {
	if n == 0 {
		return
	}
	c.free -= n
	c.anonUsed += n
	e := &c.q[c.qh]
	if e.n -= n; e.n == 0 {
		c.qh++
	}
	c.compact()
}

// Observed implements Store.
func (c *Paged) Observed() bool { return c.observed }

// SetObserver implements Store.
func (c *Paged) SetObserver(o Observer) {
	c.obs = o
	c.observed = c.obs != nil || c.low != nil
	c.uniq = c.private && !c.observed
}

// SetLower implements Store.
func (c *Paged) SetLower(o Observer) {
	c.low = o
	c.observed = c.obs != nil || c.low != nil
	c.uniq = c.private && !c.observed
}

// SetPrivate says whether Unique handles keep their private blocks here
// (the run's input promises blis.prefix_unique, and the deployment's
// handles stay on one replica: not P/D). It takes effect only while nobody
// observes the store, and must be set before the store holds any block.
func (c *Paged) SetPrivate(on bool) {
	c.private = on
	c.uniq = c.private && !c.observed
}

func (c *Paged) pushAnon(n int32) {
	if n == 0 {
		return
	}
	c.free += n
	if k := len(c.q); k > c.qh && c.q[k-1].id == anonRun {
		c.q[k-1].n += n
		return
	}
	c.q = append(c.q, qent{id: anonRun, n: n})
}

func (c *Paged) pushCached(id int32) {
	c.free++
	bl := &c.b[id]
	bl.qpos = c.qbase + uint32(len(c.q))
	c.q = append(c.q, qent{id: id, n: bl.qflags()})
}

func (c *Paged) newID() int32 {
	if n := len(c.idFree); n > 0 {
		id := c.idFree[n-1]
		c.idFree = c.idFree[:n-1]
		return id
	}
	if len(c.b) == cap(c.b) {
		// Grown by use, never past the cache's blocks (append's growth
		// would overshoot a full cache's by up to a quarter).
		n := min(max(2*len(c.b), 64), int(c.total))
		b := make([]block, len(c.b), n)
		copy(b, c.b)
		c.b = b
		next := make([]int32, len(c.next), n)
		copy(next, c.next)
		c.next = next
	}
	c.b = c.b[:len(c.b)+1]
	c.b[len(c.b)-1] = block{}
	c.next = append(c.next, -1)
	return int32(len(c.b) - 1)
}

// Alloc implements Store: the first k of the n blocks get ids (they will
// hold prompt blocks with cache keys).
func (c *Paged) Alloc(h *Handle, n, k int32) {
	if h.Unique && k > 0 && c.uniq {
		c.allocUnique(h, n, k)
		return
	}
	c.alloc(h, n, k)
}

// alloc is Alloc for a plain handle.
func (c *Paged) alloc(h *Handle, n, k int32) {
	c.free -= n
	c.anonUsed += n - k
	h.Anon += n - k
	for n > 0 {
		e := &c.q[c.qh]
		if e.id == taken {
			c.qh++
			continue
		}
		if e.id == anonRun || e.id == privRun {
			t := min(e.n, n)
			e.n -= t
			if e.n == 0 {
				c.qh++
			}
			n -= t
			if e.id == privRun { // cached blocks without records: evicted
				c.nRun -= t
				c.evictions += int64(t)
			}
			for ; t > 0 && k > 0; t, k = t-1, k-1 {
				id := c.newID()
				c.b[id].refs = 1
				c.idsHeld++
				h.IDs = append(h.IDs, id)
			}
			continue
		}
		// A cached block, evicted: leaving the queue ends its hold on
		// its key (its index entry goes stale), so its cold record is
		// not read unless someone hears of the eviction.
		id := e.id
		c.qh++
		c.nHashed--
		if e.n&qIndexed != 0 {
			c.nIndexed--
		}
		if e.n&qLoose != 0 {
			c.nLoose--
		}
		c.evictions++
		if c.obs != nil {
			c.obs.Evicted(c.b[id].key)
		}
		if c.low != nil {
			c.low.Evicted(c.b[id].key)
		}
		n--
		if k > 0 {
			k--
			c.b[id].refs = 1 // written, not read: the store does not wait
			c.idsHeld++
			h.IDs = append(h.IDs, id)
		} else {
			c.idFree = append(c.idFree, id) // its record stays stale until reused
		}
	}
	c.compact()
}

// allocUnique is Alloc for a Unique handle in a store nobody observes: its
// first keyed block gets an id, the others placeholders. The free queue
// gives up the same blocks in the same order.
func (c *Paged) allocUnique(h *Handle, n, k int32) {
	first := int32(0)
	if len(h.IDs) == 0 {
		first = 1
	}
	// The plain path, every block but the first keyed one anonymous: the
	// placeholders are counted in use with the anonymous blocks.
	plain := Handle{IDs: h.IDs}
	c.alloc(&plain, n, first)
	h.IDs = plain.IDs
	h.Anon += n - k
	for range k - first {
		h.IDs = append(h.IDs, unreg)
	}
}

// Release implements Store, last block first as vLLM does, so that a
// request's tail blocks, least likely to be shared, are evicted first. A
// Unique handle's placeholders are queued where their blocks would be:
// anonymous if not registered, else in one private run.
func (c *Paged) Release(h *Handle) {
	if len(h.IDs) > 1 && !(h.Unique && c.uniq) {
		c.touchRecords(h.IDs)
	}
	// vLLM frees each group's blocks in group order; the sliding groups'
	// blocks here are anonymous, as the full group's tail: one run.
	c.pushAnon(h.Anon + h.Slide)
	c.anonUsed -= h.Anon + h.Slide
	h.Anon, h.Slide = 0, 0
	var run int32 // registered placeholders not queued yet
	for i := len(h.IDs) - 1; i >= 0; i-- {
		id := h.IDs[i]
		if id < 0 {
			if id == reg {
				run++
				continue
			}
			c.pushRun(run)
			run = 0
			c.anonUsed--
			c.pushAnon(1)
			continue
		}
		if run > 0 {
			c.pushRun(run)
			run = 0
		}
		bl := &c.b[id]
		bl.refs--
		if bl.refcnt() > 0 {
			continue
		}
		c.idsHeld--
		if bl.hashed() {
			c.pushCached(id)
		} else {
			c.idFree = append(c.idFree, id)
			c.pushAnon(1)
		}
	}
	c.pushRun(run)
	h.IDs = h.IDs[:0]
}

// pushRun queues n registered placeholders' blocks as a private run.
func (c *Paged) pushRun(n int32) {
	if n == 0 {
		return
	}
	c.free += n
	c.anonUsed -= n
	c.nRun += n
	c.q = append(c.q, qent{id: privRun, n: n})
}

// Expose implements Store: the placeholders become blocks with ids, and
// the registered ones are registered as Register would have, linked from
// the first block, whose key loses its private mark.
func (c *Paged) Expose(h *Handle, keys []uint64) {
	if !h.Unique {
		return
	}
	h.Unique = false
	if !c.uniq || len(h.IDs) == 0 {
		return
	}
	to := 0
	for i, id := range h.IDs {
		if id >= 0 {
			c.b[id].refs &^= privBit
			continue
		}
		if id == reg {
			to = i + 1
		}
		nid := c.newID()
		c.b[nid].refs = 1
		c.idsHeld++
		c.anonUsed--
		h.IDs[i] = nid
	}
	if to > 1 {
		c.Register(h, keys, 1, to)
	}
}

// Clash implements Store.
func (c *Paged) Clash() (uint64, bool) { return c.clash, c.clashed }

// clashes notes that key k of a Unique handle's first block was found
// shared, and reports whether id is such a block (the caller then treats
// it as absent).
func (c *Paged) clashes(id int32, k uint64) bool {
	if c.b[id].refs&privBit == 0 {
		return false
	}
	if !c.clashed {
		c.clash, c.clashed = k, true
	}
	return true
}

// Slide implements Store.
func (c *Paged) Slide(h *Handle, n int32) {
	if n < 0 {
		h.Slide += n
		c.anonUsed += n
		c.pushAnon(-n)
		return
	}
	c.Alloc(h, n, 0)
	h.Anon -= n
	h.Slide += n
}

// touchRecords reads the records of blocks ids before a loop that updates
// them: at fleet scale each is a cache miss, and these reads are
// independent and overlap, where the loop's each wait in turn (the loop
// also queues each block it frees).
func (c *Paged) touchRecords(ids []int32) {
	var s uint32
	for _, id := range ids {
		s |= c.b[id].refs
	}
	c.sink = s
}

// Warm implements Store: the home slots in the index of the keys a lookup
// and registering them may probe (the first, unless loose entries exist:
// then every one), and the records of the cached blocks at the head of the
// free queue that allocating a block per key would evict (Alloc writes
// them).
func (c *Paged) Warm(keys []uint64) {
	if n := len(c.idx.slots); n > 0 && len(keys) > 0 {
		k := keys[:1]
		if c.nLoose > 0 {
			k = keys
		}
		prefetchHomes(&c.idx.slots[0], uint64(n), k)
	}
	if len(c.b) > 0 {
		prefetchQueued(&c.b[0], c.q[c.qh:min(len(c.q), c.qh+len(keys))])
	}
}

// holder returns the block holding k, the key at position i of a chain
// (-1, false: none), given prev, the block holding the key before it (-1:
// none holds it). A chain's first block and loose blocks are in the index;
// every other cached block is next[] of the block holding its chain's
// previous key (Register), so that a block is indexed once a chain, not
// once a block.
func (c *Paged) holder(k uint64, i int, prev int32) (int32, bool) {
	if prev >= 0 {
		if x := c.next[prev]; x >= 0 && c.holds(x, k) {
			return x, true
		}
	}
	if i == 0 || c.nLoose > 0 {
		if id, ok := c.idx.find(k, c); ok && !c.clashes(id, k) {
			return id, true
		}
	}
	return -1, false
}

// holderOf returns the block holding keys[n-1] (-1: none), walking the
// chain from its first key; past a key no block holds, the keys after it
// can still be loose entries.
func (c *Paged) holderOf(keys []uint64, n int) int32 {
	prev := int32(-1)
	for j := 0; j < n; j++ {
		prev, _ = c.holder(keys[j], j, prev)
	}
	return prev
}

// Lookup implements Store.
func (c *Paged) Lookup(keys []uint64, max int) int {
	if len(keys) < max {
		max = len(keys)
	}
	prev := int32(-1)
	for i := 0; i < max; i++ {
		id, ok := c.holder(keys[i], i, prev)
		if !ok {
			return i
		}
		prev = id
	}
	return max
}

// Has implements Store. A blocked admission asks it at every step about
// the same keys: the block holding keys[i-1] is remembered, and walked to
// again only when it no longer holds that key (a key's holder changes
// only when it is evicted).
func (c *Paged) Has(keys []uint64, i int) bool {
	if i >= len(keys) {
		return false
	}
	prev := int32(-1)
	if i > 0 {
		if p := c.hasPrev; p >= 0 && int(p) < len(c.b) && c.holds(p, keys[i-1]) {
			prev = p
		} else {
			prev = c.holderOf(keys, i)
			c.hasPrev = prev
		}
	}
	_, ok := c.holder(keys[i], i, prev)
	return ok
}

// HitCost implements Store.
func (c *Paged) HitCost(keys []uint64, n int) int32 {
	var k int32
	prev := int32(-1)
	for i := 0; i < n; i++ {
		prev, _ = c.holder(keys[i], i, prev)
		if c.b[prev].refcnt() == 0 {
			k++
		}
	}
	return k
}

// Touch implements Store.
func (c *Paged) Touch(h *Handle, keys []uint64, n int) {
	prev := int32(-1)
	for i := 0; i < n; i++ {
		id, _ := c.holder(keys[i], i, prev)
		prev = id
		bl := &c.b[id]
		if bl.refcnt() == 0 {
			c.q[bl.qpos-c.qbase].id = taken
			c.free--
			c.idsHeld++
		}
		bl.refs++
		h.IDs = append(h.IDs, id)
	}
}

// Register implements Store. A key already cached in another block keeps
// its block, as in vLLM. A block continuing a chain whose previous block
// h holds, when that block has no live continuation yet, is linked from
// it (next) instead of indexed: a prompt of unshared blocks costs one
// index entry, not one a block.
//
// Linking is exact because a linked block goes before the block it is
// linked from: every request holding it holds that one too (its
// registrant did; a hit takes a chain's blocks in order), and releases it
// first, so it is queued ahead of it and evicted first. So a cached key
// at position i > 0 is either next[] of the block holding key i−1 or a
// loose entry of the index; with no loose entries the index is not probed
// past a chain's first key. (Keys are prefix-chained, docs/tables.md: a
// key at position i is never one at another position.)
func (c *Paged) Register(h *Handle, keys []uint64, from, to int) {
	if h.Unique && c.uniq {
		c.registerUnique(h, keys, from, to)
		return
	}
	if c.nLoose > 0 && to-from > 1 {
		c.idx.prefetch(keys[from:to], c, int(c.nIndexed))
	}
	ph := int32(-1) // the block holding keys[j-1] (-1: none)
	if from > 0 {
		if q := h.IDs[from-1]; c.b[q].hashed() && c.b[q].key == keys[from-1] {
			ph = q
		} else {
			ph = c.holderOf(keys, from) // (its block there is not the holder: rare)
		}
	}
	fresh := false // ph was hashed by this call: next[ph] is -1 (hash)
	for j := from; j < to; j++ {
		id, k := h.IDs[j], keys[j]
		if c.b[id].hashed() { // a hit, or registered before: it holds k
			ph, fresh = id, false
			continue
		}
		free := fresh // no live block continues ph's chain
		if ph >= 0 && !fresh {
			if x := c.next[ph]; x >= 0 && c.live(x) {
				if c.b[x].key == k {
					ph, fresh = x, false // cached in another block
					continue
				}
			} else {
				free = true
			}
		}
		if free && h.IDs[j-1] == ph {
			if c.nLoose > 0 {
				if y, ok := c.idx.find(k, c); ok {
					ph, fresh = y, false
					continue
				}
			}
			c.next[ph] = id
			c.hash(id, k, 0)
			ph, fresh = id, true
			continue
		}
		// A chain's first block, a second continuation, or a chain whose
		// previous block h does not hold: indexed.
		y, added := c.idx.add(k, id, c, int(c.nIndexed))
		if !added {
			if c.clashes(y, k) {
				ph, fresh = -1, false
				continue
			}
			ph, fresh = y, false
			continue
		}
		fl := uint32(indexedBit)
		c.nIndexed++
		if j > 0 {
			fl |= looseBit
			c.nLoose++
		}
		c.hash(id, k, fl)
		ph, fresh = id, true
	}
}

// registerUnique is Register for a Unique handle: its first block is
// indexed, marked private; the others' placeholders are marked registered.
func (c *Paged) registerUnique(h *Handle, keys []uint64, from, to int) {
	for j := from; j < to; j++ {
		if j > 0 {
			h.IDs[j] = reg
			continue
		}
		id, k := h.IDs[0], keys[0]
		if c.b[id].hashed() {
			continue
		}
		if _, added := c.idx.add(k, id, c, int(c.nIndexed)); !added {
			if !c.clashed { // another request's block holds it
				c.clash, c.clashed = k, true
			}
			continue
		}
		c.nIndexed++
		c.hash(id, k, indexedBit|privBit)
	}
}

// hash makes block id hold k, with index flags fl.
func (c *Paged) hash(id int32, k uint64, fl uint32) {
	bl := &c.b[id]
	bl.key = k
	bl.refs |= hashedBit | fl
	c.next[id] = -1
	c.nHashed++
	if c.obs != nil {
		c.obs.Cached(k)
	}
	if c.low != nil {
		c.low.Cached(k)
	}
}

// QuickCheck implements Store: the O(1) part of Check.
func (c *Paged) QuickCheck() error {
	if c.free < 0 || c.anonUsed < 0 || c.idsHeld < 0 || c.free+c.anonUsed+c.idsHeld != c.total {
		return fmt.Errorf("KV blocks: %d free + %d anonymous + %d identified in use != %d total", c.free, c.anonUsed, c.idsHeld, c.total)
	}
	return nil
}

// Check implements Store: block conservation (the free queue, the blocks
// requests hold and the idle ids add up) and the cache index pointing at
// hashed blocks.
func (c *Paged) Check() error {
	var queued, cachedFree, run int32
	for i := c.qh; i < len(c.q); i++ {
		e := c.q[i]
		if e.id == taken {
			continue
		}
		if e.id == privRun {
			if e.n <= 0 {
				return fmt.Errorf("KV free queue entry %d is a private run of %d blocks", i, e.n)
			}
			queued += e.n
			run += e.n
			continue
		}
		if e.id < 0 {
			if e.id != anonRun || e.n < 0 {
				return fmt.Errorf("KV free queue entry %d is a run of %d blocks (id %d)", i, e.n, e.id)
			}
			queued += e.n
			continue
		}
		if bl := &c.b[e.id]; bl.refcnt() != 0 || !bl.hashed() || bl.qpos != c.qbase+uint32(i) || e.n != bl.qflags() {
			return fmt.Errorf("KV block %d is in the free queue with %d references (hashed: %v, entry %d with flags %d, its record says %d and %d)", e.id, bl.refcnt(), bl.hashed(), i, e.n, int(bl.qpos-c.qbase), bl.qflags())
		}
		queued++
		cachedFree++
	}
	if queued != c.free || run != c.nRun {
		return fmt.Errorf("KV free queue holds %d blocks, %d in private runs; counters say %d and %d", queued, run, c.free, c.nRun)
	}
	var held int32
	for id := range c.b {
		if r := c.b[id].refcnt(); r >= 1<<27 {
			return fmt.Errorf("KV block %d has %d references (released more often than taken?)", id, r)
		}
		if c.b[id].refcnt() > 0 {
			held++
		}
	}
	if held != c.idsHeld {
		return fmt.Errorf("KV blocks: %d identified blocks referenced, counter says %d", held, c.idsHeld)
	}
	if held+c.anonUsed+c.free != c.total {
		return fmt.Errorf("KV blocks: %d identified + %d anonymous in use + %d free != %d total", held, c.anonUsed, c.free, c.total)
	}
	if held+cachedFree+int32(len(c.idFree)) != int32(len(c.b)) || int32(len(c.b)) > c.total {
		return fmt.Errorf("KV block ids: %d held + %d cached free + %d idle != %d created (of at most %d)", held, cachedFree, len(c.idFree), len(c.b), c.total)
	}
	// Every block holding a key is indexed under it, or linked from a
	// block holding a key (Register).
	var hashed, indexed, loose int
	linked := make([]bool, len(c.b))
	for id := range c.b {
		if x := c.next[id]; x >= 0 && c.live(int32(id)) && c.live(x) {
			linked[x] = true
		}
	}
	for id := range c.b {
		bl := &c.b[id]
		if !c.live(int32(id)) {
			continue
		}
		hashed++
		if bl.refs&indexedBit == 0 {
			if bl.refs&looseBit != 0 || !linked[id] {
				return fmt.Errorf("KV block %d holds a key it is neither indexed nor linked under", id)
			}
			continue
		}
		indexed++
		if bl.refs&looseBit != 0 {
			loose++
		}
		if got, ok := c.idx.find(bl.key, c); !ok || got != int32(id) {
			return fmt.Errorf("KV block %d holds a key the cache index does not map to it", id)
		}
	}
	if hashed != int(c.nHashed) || indexed != int(c.nIndexed) || loose != int(c.nLoose) || c.idx.n < indexed || 4*c.idx.n > 3*len(c.idx.slots) {
		return fmt.Errorf("KV cache index holds %d entries in %d slots; %d blocks are hashed, %d indexed, %d loose (counters say %d, %d, %d)", c.idx.n, len(c.idx.slots), hashed, indexed, loose, c.nHashed, c.nIndexed, c.nLoose)
	}
	return nil
}

// Clone implements Store.
func (c *Paged) Clone() Store {
	d := *c
	d.b = append([]block(nil), c.b...)
	d.next = append([]int32(nil), c.next...)
	d.idFree = append([]int32(nil), c.idFree...)
	d.q = append([]qent(nil), c.q...)
	d.idx.slots = append([]uint32(nil), c.idx.slots...)
	d.obs, d.low, d.observed = nil, nil, false
	return &d
}

// CloneInto is Clone into the memory of an earlier clone dst that is no
// longer used (a dead counterfactual fork's), so that forking often does
// not allocate; dst nil (or not a *Paged) is Clone.
func (c *Paged) CloneInto(dst Store) Store {
	d, _ := dst.(*Paged)
	if d == nil || d == c {
		return c.Clone()
	}
	b, next, idFree, q, slots := d.b, d.next, d.idFree, d.q, d.idx.slots
	*d = *c
	d.b = append(b[:0], c.b...)
	d.next = append(next[:0], c.next...)
	d.idFree = append(idFree[:0], c.idFree...)
	d.q = append(q[:0], c.q...)
	d.idx.slots = append(slots[:0], c.idx.slots...)
	d.obs, d.low, d.observed = nil, nil, false
	return d
}

// Keys derives one cache key per full engine block of the prompt from
// prefix_hashes given at another block size (prefix tokens per hash). Engine
// block j (tokens [jB, (j+1)B)) is keyed by the hash of the source block that
// holds its last token and by how far into that source block it ends: the
// source hashes are prefix-chained, so equal keys mean equal prefixes. Blocks
// beyond the hashed tokens get no key (never shared).
func Keys(dst []uint64, hashes []uint64, inputTokens int32, prefix, block int32) []uint64 {
	dst = dst[:0]
	if len(hashes) == 0 {
		return dst
	}
	covered := int64(len(hashes)) * int64(prefix)
	if int64(inputTokens) < covered {
		covered = int64(inputTokens)
	}
	nb := covered / int64(block)
	if prefix == block { // source block j is engine block j, ending k = block into it
		m := uint64(block) * 0x9E3779B97F4A7C15
		for _, h := range hashes[:nb] {
			dst = append(dst, rng.Mix64(h^m))
		}
		return dst
	}
	for j := int64(0); j < nb; j++ {
		end := (j + 1) * int64(block)
		i := (end - 1) / int64(prefix)
		k := end - i*int64(prefix)
		dst = append(dst, rng.Mix64(hashes[i]^uint64(k)*0x9E3779B97F4A7C15))
	}
	return dst
}

// Records is the number of identified blocks the cache has created (their
// records, links and free-queue entries, ~28 bytes each, and index slots
// for a chain's first blocks): the part of its memory that grows with the
// prefix-cache keys it has held.
func (c *Paged) Records() int { return len(c.b) }

// QueueHead is the address of the free queue's head entry, which taking
// and counting free blocks reads first, for a read-ahead (nil: empty).
func (c *Paged) QueueHead() unsafe.Pointer {
	if c.qh < len(c.q) {
		return unsafe.Pointer(&c.q[c.qh])
	}
	return nil
}
