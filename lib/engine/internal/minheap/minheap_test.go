package minheap

import (
	"slices"
	"testing"

	"github.com/blis-sim/blis/lib/rng"
)

type item struct {
	key, seq int
}

func (a *item) Less(b *item) bool { return a.key < b.key || a.key == b.key && a.seq < b.seq }

// Pops come out in Less order whatever the pushes, interleaved with pops,
// and Top is always the next pop.
func TestHeapOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []int
	}{
		{"empty", nil},
		{"one", []int{5}},
		{"sorted", []int{1, 2, 3, 4, 5, 6, 7}},
		{"reversed", []int{7, 6, 5, 4, 3, 2, 1}},
		{"ties keep push order", []int{3, 1, 3, 1, 3, 1}},
		{"all equal", []int{4, 4, 4, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Heap[item, *item]
			var want []item
			for i, k := range tc.keys {
				h.Push(item{k, i})
				want = append(want, item{k, i})
			}
			slices.SortFunc(want, func(a, b item) int {
				if a.Less(&b) {
					return -1
				}
				return 1
			})
			for i, w := range want {
				if h.Len() != len(want)-i || *h.Top() != w {
					t.Fatalf("pop %d: len %d, top %v; want %d, %v", i, h.Len(), *h.Top(), len(want)-i, w)
				}
				if got := h.Pop(); got != w {
					t.Fatalf("pop %d: %v, want %v", i, got, w)
				}
			}
			if h.Len() != 0 {
				t.Fatalf("%d left", h.Len())
			}
		})
	}
}

// Random pushes and pops against a sorted slice.
func TestHeapMatchesSort(t *testing.T) {
	g := rng.New(1, "minheap")
	var h Heap[item, *item]
	var ref []item
	for op := 0; op < 5000; op++ {
		if g.IntN(3) > 0 || len(ref) == 0 {
			x := item{g.IntN(50), op}
			h.Push(x)
			ref = append(ref, x)
			continue
		}
		m := 0
		for i := range ref {
			if ref[i].Less(&ref[m]) {
				m = i
			}
		}
		if got := h.Pop(); got != ref[m] {
			t.Fatalf("op %d: popped %v, want %v", op, got, ref[m])
		}
		ref = slices.Delete(ref, m, m+1)
	}
}
