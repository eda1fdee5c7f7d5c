package kv

// keyTable maps prefix-cache keys to block ids: open addressing with linear
// probing and backward-shift deletion (no tombstones, so heavy eviction churn
// does not lengthen probes). Keys are already mixed (mix64), so their low
// bits index the table directly. Capacity is fixed at twice the blocks, the
// most keys it can hold.
type keyTable struct {
	keys   []uint64
	vals   []int32 // block id + 1; 0 = empty slot
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

// cloneInto is clone into the slots of a dead clone (keys, vals).
func (t *keyTable) cloneInto(keys []uint64, vals []int32) keyTable {
	d := *t
	if t.vals != nil {
		d.keys = append(keys[:0], t.keys...)
		d.vals = append(vals[:0], t.vals...)
	}
	return d
}
