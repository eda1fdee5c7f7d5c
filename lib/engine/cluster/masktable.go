package cluster

// maskTable maps prefix-cache keys to the set of group positions holding
// them, as a bit mask: the prefix index of a group of at most 64 replicas
// (the common case) without a Go map or a slice per key. Open addressing
// with linear probing and backward-shift deletion (no tombstones: heavy
// cache/evict churn does not lengthen probes); keys are already mixed
// (mix64), so their low bits index the table. A mask is never 0 while its
// key is present, so 0 marks an empty slot.
type maskTable struct {
	keys  []uint64
	masks []uint64
	mask  uint64
	n     int
}

func (t *maskTable) find(k uint64) (uint64, bool) {
	if t.masks == nil {
		return 0, false
	}
	for i := k & t.mask; ; i = (i + 1) & t.mask {
		m := t.masks[i]
		if m == 0 {
			return i, false
		}
		if t.keys[i] == k {
			return i, true
		}
	}
}

// get is the holders of k (0: none).
func (t *maskTable) get(k uint64) uint64 {
	if i, ok := t.find(k); ok {
		return t.masks[i]
	}
	return 0
}

// set adds bit to k's holders.
func (t *maskTable) set(k, bit uint64) {
	if t.masks == nil || uint64(t.n+1)*2 > t.mask+1 {
		t.grow()
	}
	i, ok := t.find(k)
	if ok {
		t.masks[i] |= bit
		return
	}
	t.keys[i], t.masks[i] = k, bit
	t.n++
}

// clear removes bit from k's holders, and k when none is left.
func (t *maskTable) clear(k, bit uint64) {
	i, ok := t.find(k)
	if !ok {
		return
	}
	t.masks[i] &^= bit
	if t.masks[i] == 0 {
		t.n--
		t.shift(i)
	}
}

// shift closes the hole at i (backward-shift deletion).
func (t *maskTable) shift(i uint64) {
	for j := (i + 1) & t.mask; t.masks[j] != 0; j = (j + 1) & t.mask {
		home := t.keys[j] & t.mask
		// Move j back into the hole unless its home lies in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.keys[i], t.masks[i] = t.keys[j], t.masks[j]
			t.masks[j] = 0
			i = j
		}
	}
}

func (t *maskTable) grow() {
	size := uint64(1024)
	if t.masks != nil {
		size = 2 * (t.mask + 1)
	}
	old, oldM := t.keys, t.masks
	t.keys, t.masks, t.mask, t.n = make([]uint64, size), make([]uint64, size), size-1, 0
	for i, m := range oldM {
		if m != 0 {
			t.set(old[i], m)
		}
	}
}

// clearAll removes bit from every key (a replica stopped).
func (t *maskTable) clearAll(bit uint64) {
	for i := uint64(0); i <= t.mask && t.masks != nil; {
		if t.masks[i]&bit == 0 {
			i++
			continue
		}
		t.masks[i] &^= bit
		if t.masks[i] != 0 {
			i++
			continue
		}
		t.n--
		t.shift(i) // i now holds the next entry (or is empty): look again
		if t.masks[i] == 0 {
			i++
		}
	}
}

func (t *maskTable) clone() maskTable {
	return maskTable{keys: append([]uint64(nil), t.keys...), masks: append([]uint64(nil), t.masks...), mask: t.mask, n: t.n}
}
