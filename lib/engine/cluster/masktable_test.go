package cluster

import (
	"math/rand/v2"
	"testing"
)

// TestMaskTable against a map: random sets and clears (with the table
// growing and deleting by backward shift), and clearAll.
func TestMaskTable(t *testing.T) {
	var mt maskTable
	ref := map[uint64]uint64{}
	g := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		k := g.Uint64N(5000) * 0x9E3779B97F4A7C15 // mixed keys, some colliding in the low bits
		bit := uint64(1) << g.IntN(8)
		if g.IntN(3) == 0 {
			mt.clear(k, bit)
			if ref[k] &^= bit; ref[k] == 0 {
				delete(ref, k)
			}
		} else {
			mt.set(k, bit)
			ref[k] |= bit
		}
		if i%50000 == 49999 {
			mt.clearAll(1 << 3)
			for k, m := range ref {
				if ref[k] = m &^ (1 << 3); ref[k] == 0 {
					delete(ref, k)
				}
			}
		}
	}
	if mt.n != len(ref) {
		t.Fatalf("%d keys, want %d", mt.n, len(ref))
	}
	for k, m := range ref {
		if got := mt.get(k); got != m {
			t.Fatalf("key %x: mask %b, want %b", k, got, m)
		}
	}
	for i, m := range mt.masks {
		if m != 0 && ref[mt.keys[i]] != m {
			t.Fatalf("slot %d holds %x → %b, not in the map", i, mt.keys[i], m)
		}
	}
}
