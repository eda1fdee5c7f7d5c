package kv

import (
	"fmt"

	"github.com/blis-sim/blis/lib/rng"
)

// kvCache is one replica's paged KV cache with prefix caching, after vLLM
// v1's block pool: blocks whose reference count drops to zero go to the tail
// of a free queue but keep their hash, so a later request with the same
// prefix can take them back; allocation takes from the head (least recently
// freed), evicting the hash it held.
//
// Only blocks that hold (or will hold) a prefix-cache key have an identity
// (an id); every other block is anonymous and counted, and consecutive
// anonymous blocks in the free queue are one run. The queue order is exactly
// vLLM's, but a request without prefix hashes allocates and frees in O(1)
// per call instead of touching one block struct per block.
type Paged struct {
	blockSize int32
	total     int32
	free      int32 // blocks in the free queue
	anonUsed  int32 // anonymous blocks held by requests
	idsHeld   int32 // identified blocks with references
	b         []block
	idFree    []int32 // created ids holding nothing
	q         []qent  // free queue from q[qh]; a cached entry is valid iff it carries its block's gen
	qh        int
	idx       blockIndex
	nHashed   int // blocks holding a key
	evictions int64
	obs       Observer
	low       Observer // lower KV tiers (nil: GPU only)
}

// qent is a free-queue entry: a cached block (id >= 0, n its gen when
// queued) or n anonymous blocks (id < 0).
type qent struct {
	id int32
	n  int32
}

// block is one identified KV block, 16 bytes: a full cache holds a record
// per block on every replica of a fleet.
//
// gen changes each time the block enters or leaves the free queue, so an
// entry queued before is stale. A stale entry could pass for live only
// after 2^31 more entries of the same block were queued behind it, all
// still in the queue (entries leave it from the head only): 16 GiB of
// queue.
type block struct {
	key  uint64
	gen  uint32
	refs uint32 // references, and hashedBit while the block holds key
}

const hashedBit = 1 << 31

func (b *block) hashed() bool  { return b.refs&hashedBit != 0 }
func (b *block) refcnt() int32 { return int32(b.refs &^ hashedBit) }

// NewPaged returns an empty cache of blocks blocks of blockSize tokens.
func NewPaged(blocks int32, blockSize int32) *Paged {
	// Block structs are created as ids are first needed: a run without
	// prefix hashes never allocates them.
	c := &Paged{blockSize: blockSize, total: blocks, free: blocks}
	if blocks > 0 {
		c.q = append(c.q, qent{id: -1, n: blocks})
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
		if e.id < 0 {
			n += e.n
			continue
		}
		if c.b[e.id].gen == uint32(e.n) {
			break // a cached block: the next Alloc past here evicts it
		}
	}
	return n
}

// AnonHead implements Store.
func (c *Paged) AnonHead() int32 {
	if c.qh < len(c.q) && c.q[c.qh].id < 0 {
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
	if c.qh > 4096 && c.qh > len(c.q)/2 {
		m := copy(c.q, c.q[c.qh:])
		c.q = c.q[:m]
		c.qh = 0
	}
}

// Observed implements Store.
func (c *Paged) Observed() bool { return c.obs != nil || c.low != nil }

// SetObserver implements Store.
func (c *Paged) SetObserver(o Observer) { c.obs = o }

// SetLower implements Store.
func (c *Paged) SetLower(o Observer) { c.low = o }

func (c *Paged) pushAnon(n int32) {
	if n == 0 {
		return
	}
	c.free += n
	if k := len(c.q); k > c.qh && c.q[k-1].id < 0 {
		c.q[k-1].n += n
		return
	}
	c.q = append(c.q, qent{id: -1, n: n})
}

func (c *Paged) pushCached(id int32) {
	c.free++
	bl := &c.b[id]
	bl.gen++
	c.q = append(c.q, qent{id: id, n: int32(bl.gen)})
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
		b := make([]block, len(c.b), min(max(2*len(c.b), 64), int(c.total)))
		copy(b, c.b)
		c.b = b
	}
	c.b = c.b[:len(c.b)+1]
	c.b[len(c.b)-1] = block{}
	return int32(len(c.b) - 1)
}

// Alloc implements Store: the first k of the n blocks get ids (they will
// hold prompt blocks with cache keys).
func (c *Paged) Alloc(h *Handle, n, k int32) {
	c.free -= n
	c.anonUsed += n - k
	h.Anon += n - k
	for n > 0 {
		e := &c.q[c.qh]
		if e.id < 0 {
			t := min(e.n, n)
			e.n -= t
			if e.n == 0 {
				c.qh++
			}
			n -= t
			for ; t > 0 && k > 0; t, k = t-1, k-1 {
				id := c.newID()
				c.b[id].refs = 1
				c.idsHeld++
				h.IDs = append(h.IDs, id)
			}
			continue
		}
		id := e.id
		c.qh++
		bl := &c.b[id]
		if bl.gen != uint32(e.n) {
			continue // taken back by a cache hit since it was queued
		}
		bl.gen++
		if bl.hashed() {
			bl.refs &^= hashedBit // its index entry is now stale
			c.nHashed--
			c.evictions++
			if c.obs != nil {
				c.obs.Evicted(bl.key)
			}
			if c.low != nil {
				c.low.Evicted(bl.key)
			}
		}
		n--
		if k > 0 {
			k--
			bl.refs = 1
			c.idsHeld++
			h.IDs = append(h.IDs, id)
		} else {
			c.idFree = append(c.idFree, id)
		}
	}
	if c.qh > 4096 && c.qh > len(c.q)/2 {
		m := copy(c.q, c.q[c.qh:])
		c.q = c.q[:m]
		c.qh = 0
	}
}

// Release implements Store, last block first as vLLM does, so that a
// request's tail blocks, least likely to be shared, are evicted first.
func (c *Paged) Release(h *Handle) {
	c.pushAnon(h.Anon)
	c.anonUsed -= h.Anon
	h.Anon = 0
	for i := len(h.IDs) - 1; i >= 0; i-- {
		id := h.IDs[i]
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
	h.IDs = h.IDs[:0]
}

// Lookup implements Store.
func (c *Paged) Lookup(keys []uint64, max int) int {
	if len(keys) < max {
		max = len(keys)
	}
	for i := 0; i < max; i++ {
		if _, ok := c.idx.find(keys[i], c.b); !ok {
			return i
		}
	}
	return max
}

// Has implements Store.
func (c *Paged) Has(keys []uint64, i int) bool {
	if i >= len(keys) {
		return false
	}
	_, ok := c.idx.find(keys[i], c.b)
	return ok
}

// HitCost implements Store.
func (c *Paged) HitCost(keys []uint64, n int) int32 {
	var k int32
	for i := 0; i < n; i++ {
		if id, _ := c.idx.find(keys[i], c.b); c.b[id].refcnt() == 0 {
			k++
		}
	}
	return k
}

// Touch implements Store.
func (c *Paged) Touch(h *Handle, keys []uint64, n int) {
	for i := 0; i < n; i++ {
		id, _ := c.idx.find(keys[i], c.b)
		bl := &c.b[id]
		if bl.refcnt() == 0 {
			bl.gen++ // its queue entry is now stale
			c.free--
			c.idsHeld++
		}
		bl.refs++
		h.IDs = append(h.IDs, id)
	}
}

// Register implements Store. A key already cached in another block keeps
// its block, as in vLLM.
func (c *Paged) Register(h *Handle, keys []uint64, from, to int) {
	if to-from > 1 {
		c.idx.prefetch(keys[from:to], c.b, c.nHashed)
	}
	for j := from; j < to; j++ {
		id := h.IDs[j]
		bl := &c.b[id]
		if bl.hashed() {
			continue
		}
		k := keys[j]
		if !c.idx.add(k, id, c.b, c.nHashed) {
			continue
		}
		bl.key = k
		bl.refs |= hashedBit
		c.nHashed++
		if c.obs != nil {
			c.obs.Cached(k)
		}
		if c.low != nil {
			c.low.Cached(k)
		}
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
	var queued, cachedFree int32
	for i := c.qh; i < len(c.q); i++ {
		e := c.q[i]
		if e.id < 0 {
			if e.n < 0 {
				return fmt.Errorf("KV free queue has a run of %d blocks", e.n)
			}
			queued += e.n
			continue
		}
		if c.b[e.id].gen != uint32(e.n) {
			continue
		}
		if c.b[e.id].refcnt() != 0 || !c.b[e.id].hashed() {
			return fmt.Errorf("KV block %d is in the free queue with %d references (hashed: %v)", e.id, c.b[e.id].refcnt(), c.b[e.id].hashed())
		}
		queued++
		cachedFree++
	}
	if queued != c.free {
		return fmt.Errorf("KV free queue holds %d blocks, counter says %d", queued, c.free)
	}
	var held int32
	for id := range c.b {
		if r := c.b[id].refcnt(); r >= 1<<30 {
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
	var hashed int
	for id := range c.b {
		if c.b[id].hashed() {
			hashed++
			if got, ok := c.idx.find(c.b[id].key, c.b); !ok || got != int32(id) {
				return fmt.Errorf("KV block %d holds a key the cache index does not map to it", id)
			}
		}
	}
	if hashed != c.nHashed || c.idx.n < hashed || 4*c.idx.n > 3*len(c.idx.slots) {
		return fmt.Errorf("KV cache index holds %d entries in %d slots, %d blocks are hashed (counter says %d)", c.idx.n, len(c.idx.slots), hashed, c.nHashed)
	}
	return nil
}

// Clone implements Store.
func (c *Paged) Clone() Store {
	d := *c
	d.b = append([]block(nil), c.b...)
	d.idFree = append([]int32(nil), c.idFree...)
	d.q = append([]qent(nil), c.q...)
	d.idx.slots = append([]uint64(nil), c.idx.slots...)
	d.obs, d.low = nil, nil
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
	b, idFree, q, slots := d.b, d.idFree, d.q, d.idx.slots
	*d = *c
	d.b = append(b[:0], c.b...)
	d.idFree = append(idFree[:0], c.idFree...)
	d.q = append(q[:0], c.q...)
	d.idx.slots = append(slots[:0], c.idx.slots...)
	d.obs, d.low = nil, nil
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
	for j := int64(0); j < nb; j++ {
		end := (j + 1) * int64(block)
		i := (end - 1) / int64(prefix)
		k := end - i*int64(prefix)
		dst = append(dst, rng.Mix64(hashes[i]^uint64(k)*0x9E3779B97F4A7C15))
	}
	return dst
}
