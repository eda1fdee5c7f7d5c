package kv

import "math/bits"

// keyTable maps a lower tier's prefix-cache keys to its slots (the GPU
// cache's blocks have blockIndex): open addressing with linear probing and
// backward-shift deletion (no tombstones, so heavy eviction churn does not
// lengthen probes). Keys are already mixed (mix64), so their low bits index
// the table directly. It is sized at twice the tier's blocks (up to 4,096)
// on the first key and doubles when half full.
type keyTable struct {
	keys   []uint64
	vals   []int32 // slot + 1; 0 = empty
	mask   uint64
	n      int
	blocks int32
}

// newKeyTable sizes a table for blocks keys; the slots are allocated on the
// first insertion, so runs without prefix hashes never pay for them.
func newKeyTable(blocks int32) keyTable { return keyTable{blocks: blocks} }

func (t *keyTable) get(k uint64) (int32, bool) {
	if t.vals == nil {
		return 0, false
	}
	for i := k & t.mask; ; i = (i + 1) & t.mask {
		v := t.vals[i]
		if v == 0 {
			return 0, false
		}
		if t.keys[i] == k {
			return v - 1, true
		}
	}
}

// put inserts k (which must be absent).
func (t *keyTable) put(k uint64, id int32) {
	if t.vals == nil {
		size := uint64(16)
		for size < 2*uint64(t.blocks) {
			size <<= 1
		}
		t.keys, t.vals, t.mask = make([]uint64, size), make([]int32, size), size-1
	} else if uint64(t.n+1)*2 > t.mask+1 {
		t.grow() // only a table sized below its content (lower KV tiers)
	}
	i := k & t.mask
	for t.vals[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.keys[i], t.vals[i] = k, id+1
	t.n++
}

// del removes k if it maps to id.
func (t *keyTable) del(k uint64, id int32) {
	if t.vals == nil {
		return
	}
	i := k & t.mask
	for {
		v := t.vals[i]
		if v == 0 {
			return
		}
		if t.keys[i] == k {
			if v-1 != id {
				return
			}
			break
		}
		i = (i + 1) & t.mask
	}
	// Backward shift: move later entries of the probe run into the hole
	// when their home slot is at or before it.
	for j := (i + 1) & t.mask; t.vals[j] != 0; j = (j + 1) & t.mask {
		home := t.keys[j] & t.mask
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.vals[i] = 0
	t.n--
}

// grow doubles the table and reinserts every key.
func (t *keyTable) grow() {
	keys, vals := t.keys, t.vals
	size := 2 * (t.mask + 1)
	t.keys, t.vals, t.mask, t.n = make([]uint64, size), make([]int32, size), size-1, 0
	for i, v := range vals {
		if v != 0 {
			j := keys[i] & t.mask
			for t.vals[j] != 0 {
				j = (j + 1) & t.mask
			}
			t.keys[j], t.vals[j] = keys[i], v
			t.n++
		}
	}
}

func (t *keyTable) clone() keyTable {
	d := *t
	if t.vals != nil {
		d.keys = append([]uint64(nil), t.keys...)
		d.vals = append([]int32(nil), t.vals...)
	}
	return d
}

// blockIndex maps the prefix-cache keys of a Paged cache's indexed blocks
// (a chain's first blocks and loose ones: Paged.Register) to their ids.
// At fleet scale every access to a replica's index misses the processor's
// caches, and on a full cache every indexed block is indexed once and
// evicted once; so eviction does not touch the index: the
// evicted block no longer holds its key (Paged.holds), its entry goes
// stale, every match is checked against the block's record and the queue,
// and stale entries are dropped when the index is rebuilt from the records
// (a sequential walk; the index fits the processor's cache while it is
// rebuilt), which happens when live and stale entries fill 3/4 of the
// slots. The slots grow with the blocks indexed (3 a block, 12 bytes).
//
// A slot is 32 bits: the block id + 1 (0: empty) in the high bits, as few
// as the cache's blocks need, and below it the key's low bits as a
// fingerprint. Small slots buy room: a rebuild comes after 1.25 times the
// live entries have been added (with two 64-bit slots a block, 16 bytes,
// after half). The home slot comes from the key's high 32 bits (keys are
// mixed), scaled to the size.
type blockIndex struct {
	slots  []uint32
	n      int    // entries, live and stale
	fpBits uint32 // a slot's fingerprint bits (newBlockIndex)
	sink   uint32 // what prefetch read (kept so the reads stay)
}

// newBlockIndex returns an empty index for a cache of blocks blocks: ids
// are below blocks, so id + 1 takes bits.Len32(blocks) bits at most.
func newBlockIndex(blocks int32) blockIndex {
	return blockIndex{fpBits: 32 - uint32(bits.Len32(uint32(blocks)))}
}

// slotsPerBlock sizes the index at its rebuilds.
const slotsPerBlock = 3

// prefetch makes room for len(keys) adds and reads their home slots, so
// the adds that follow find them in the processor's cache: these reads
// are independent and overlap, where each add's probe would wait for its
// own miss.
func (x *blockIndex) prefetch(keys []uint64, c *Paged, indexed int) {
	if 4*(x.n+len(keys)) > 3*len(x.slots) {
		x.rebuild(c, indexed+len(keys)-1)
	}
	var s uint32
	for _, k := range keys {
		s |= x.slots[x.home(k)]
	}
	x.sink = s
}

func (x *blockIndex) home(k uint64) int {
	return int((k >> 32) * uint64(len(x.slots)) >> 32)
}

func (x *blockIndex) fp(k uint64) uint32 { return uint32(k) & (1<<x.fpBits - 1) }

// find returns the block of c holding k.
func (x *blockIndex) find(k uint64, c *Paged) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	fp, mask := x.fp(k), uint32(1)<<x.fpBits-1
	for i := x.home(k); ; {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&mask == fp {
			if id := int32(s>>x.fpBits) - 1; c.holds(id, k) {
				return id, true
			}
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// add indexes k in block id, unless an indexed block holds k already
// (that block, false). The caller marks the block indexed; indexed blocks
// number at most indexed. (A stale entry of the same block is left alone:
// a live entry may follow it in the probe run.)
func (x *blockIndex) add(k uint64, id int32, c *Paged, indexed int) (int32, bool) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.rebuild(c, indexed)
	}
	fp, mask := x.fp(k), uint32(1)<<x.fpBits-1
	i := x.home(k)
	for {
		s := x.slots[i]
		if s == 0 {
			break
		}
		if s&mask == fp {
			if y := int32(s>>x.fpBits) - 1; c.holds(y, k) {
				return y, false
			}
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
	x.slots[i] = uint32(id+1)<<x.fpBits | fp
	x.n++
	return id, true
}

// rebuild drops the stale entries, growing the slots to slotsPerBlock
// times the live entries (plus the one being added) when they are fewer.
// The blocks evicted and not yet reused (idle ids) lose their stale flags
// first.
func (x *blockIndex) rebuild(c *Paged, indexed int) {
	b := c.b
	for _, id := range c.idFree {
		b[id].refs = 0
	}
	if size := max(64, slotsPerBlock*(indexed+1)); size > len(x.slots) {
		x.slots = make([]uint32, size)
	} else {
		clear(x.slots)
	}
	x.n = 0
	for id := range b {
		bl := &b[id]
		if bl.refs&(hashedBit|indexedBit) != hashedBit|indexedBit {
			continue
		}
		i := x.home(bl.key)
		for x.slots[i] != 0 {
			if i++; i == len(x.slots) {
				i = 0
			}
		}
		x.slots[i] = uint32(id+1)<<x.fpBits | x.fp(bl.key)
		x.n++
	}
}
