package kv

import (
	"testing"

	"github.com/blis-sim/blis/lib/rng"
)

// TestKeyTableMatchesMap drives the table and a Go map with the same random
// operations, with keys crowded into few home slots so probe runs wrap and
// deletions shift entries back.
func TestKeyTableMatchesMap(t *testing.T) {
	g := rng.New(3, "keytable")
	for _, crowd := range []uint64{0, 7, 1 << 40} {
		tab := newKeyTable(40)
		ref := map[uint64]int32{}
		for op := 0; op < 20000; op++ {
			k := uint64(g.IntN(120))
			if crowd != 0 {
				k = k*crowd | uint64(g.IntN(3)) // many keys share low bits
			}
			id, ok := ref[k]
			switch {
			case !ok && len(ref) < 80:
				id = int32(g.IntN(1000))
				tab.put(k, id)
				ref[k] = id
			case ok && g.IntN(2) == 0:
				tab.del(k, id+1) // wrong id: no-op
				tab.del(k, id)
				delete(ref, k)
			}
			got, gok := tab.get(k)
			want, wok := ref[k]
			if gok != wok || got != want {
				t.Fatalf("op %d key %d: got %d,%v want %d,%v", op, k, got, gok, want, wok)
			}
			if tab.n != len(ref) {
				t.Fatalf("op %d: table holds %d, map %d", op, tab.n, len(ref))
			}
		}
		for k, v := range ref {
			if got, ok := tab.get(k); !ok || got != v {
				t.Fatalf("key %d lost", k)
			}
		}
	}
}

// A table sized below its content (a lower KV tier's index) grows and keeps
// every key.
func TestKeyTableGrows(t *testing.T) {
	kt := newKeyTable(4)
	for i := int32(0); i < 1000; i++ {
		kt.put(uint64(i)*0x9E3779B97F4A7C15, i)
	}
	for i := int32(0); i < 1000; i += 2 {
		kt.del(uint64(i)*0x9E3779B97F4A7C15, i)
	}
	for i := int32(0); i < 1000; i++ {
		id, ok := kt.get(uint64(i) * 0x9E3779B97F4A7C15)
		if ok != (i%2 == 1) || (ok && id != i) {
			t.Fatalf("key %d: %d %v", i, id, ok)
		}
	}
	if kt.n != 500 || kt.mask+1 < 1000 {
		t.Fatalf("n %d size %d", kt.n, kt.mask+1)
	}
}
