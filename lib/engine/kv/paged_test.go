package kv

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/blis-sim/blis/lib/rng"
)

func TestKVCacheLRU(t *testing.T) {
	c := NewPaged(4, 16)
	a, b, x := &Handle{}, &Handle{}, &Handle{}
	ak, bk := []uint64{1, 2}, []uint64{3, 4}
	c.Alloc(a, 2, 2)
	c.Register(a, ak, 0, 2)
	c.Alloc(b, 2, 2)
	c.Register(b, bk, 0, 2)
	c.Release(a) // freed first: evicted first
	c.Release(b)
	if c.free != 4 || c.Lookup([]uint64{1, 2}, 2) != 2 || c.Lookup([]uint64{3, 4}, 2) != 2 {
		t.Fatal("freed blocks should stay cached")
	}
	c.Alloc(x, 1, 0) // evicts a's last block (freed in reverse order), not a's first
	if c.Lookup([]uint64{1, 2}, 2) != 1 || c.Lookup([]uint64{3, 4}, 2) != 2 {
		t.Fatalf("after one allocation: a keeps %d, b keeps %d", c.Lookup([]uint64{1, 2}, 2), c.Lookup([]uint64{3, 4}, 2))
	}
	y := &Handle{}
	c.Touch(y, bk, 2) // b's blocks are taken back from the free queue
	c.Alloc(x, 1, 0)  // so the next eviction is a's first block
	if c.Lookup([]uint64{1}, 1) != 0 || c.free != 0 {
		t.Fatalf("free %d, a's first block cached: %d", c.free, c.Lookup([]uint64{1}, 1))
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	c.Release(x)
	c.Release(y)
	if err := c.Check(); err != nil || c.free != 4 {
		t.Fatalf("%v, free %d", err, c.free)
	}
}

// TakeAnon(n) leaves the store as n calls Alloc(h, 1, 0) would, the
// handles counting their blocks; CleanFree counts the anonymous blocks
// ahead of the first cached one.
func TestTakeAnon(t *testing.T) {
	mk := func() (*Paged, *Handle) {
		c := NewPaged(64, 16)
		var h, k Handle
		c.Alloc(&k, 4, 4)
		c.Register(&k, []uint64{1, 2, 3, 4}, 0, 4)
		c.Release(&k) // 4 cached blocks at the tail of the queue
		c.Alloc(&h, 10, 0)
		return c, &h
	}
	a, ha := mk()
	b, hb := mk()
	if n := a.AnonHead(); n != 50 || a.CleanFree() != 50 {
		t.Fatalf("head run %d, clean %d, want 50, 50", n, a.CleanFree())
	}
	for i := 0; i < 30; i++ {
		a.Alloc(ha, 1, 0)
	}
	b.TakeAnon(30)
	hb.Anon += 30
	if a.Free() != b.Free() || a.Used() != b.Used() || ha.Anon != hb.Anon || a.AnonHead() != b.AnonHead() {
		t.Fatalf("Alloc ×30: free %d head %d; TakeAnon(30): free %d head %d", a.Free(), a.AnonHead(), b.Free(), b.AnonHead())
	}
	b.TakeAnon(20)
	if b.AnonHead() != 0 || b.CleanFree() != 0 {
		t.Fatalf("the cached blocks are next: head %d, clean %d", b.AnonHead(), b.CleanFree())
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}

// A cached block evicted by an allocation that does not reuse its id keeps
// a stale record until its id is reused (Alloc does not read it): it must
// not be found, taken back or kept in the index by a rebuild, and its key
// may be cached again in another block.
func TestEvictedIdleBlock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(c *Paged) // after the eviction
		want  int            // blocks of key 1 cached
	}{
		{"left idle", func(*Paged) {}, 0},
		{"rebuilt", func(c *Paged) { c.idx.rebuild(c, int(c.nHashed)) }, 0},
		{"id reused, no key", func(c *Paged) { c.Alloc(&Handle{}, 1, 1) }, 0},
		{"key cached again", func(c *Paged) {
			var h Handle
			c.Alloc(&h, 1, 1)
			c.Register(&h, []uint64{1}, 0, 1)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewPaged(3, 16)
			var a, d Handle
			c.Alloc(&a, 2, 2)
			c.Register(&a, []uint64{1, 2}, 0, 2)
			c.Release(&a) // queue: anonymous 1, key 2, key 1
			c.Alloc(&d, 2, 0)
			c.Release(&d) // queue: key 1, anonymous 2
			c.Alloc(&d, 1, 0)
			if len(c.idFree) != 2 || c.Evictions() != 2 {
				t.Fatalf("idle ids %v, evictions %d: want 2 and 2", c.idFree, c.Evictions())
			}
			tc.after(c)
			if got := c.Lookup([]uint64{1}, 1); got != tc.want {
				t.Fatalf("key 1 cached in %d blocks, want %d", got, tc.want)
			}
			if c.Lookup([]uint64{2}, 1) != 0 || c.HitCost([]uint64{1}, tc.want) != 0 {
				t.Fatal("key 2 still cached, or key 1 costs a free block")
			}
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
			c.idx.rebuild(c, int(c.nHashed))
			if c.idx.n != int(c.nHashed) {
				t.Fatalf("rebuilt index holds %d entries, %d blocks hold keys", c.idx.n, c.nHashed)
			}
		})
	}
}

// Sliding-window blocks (Slide) are counted like anonymous ones: taken
// from the head of the free queue (evicting a cached block as Alloc
// would), freed to its tail as they leave the window, and freed with the
// rest of the handle; the blocks are conserved at every step.
func TestKVSlide(t *testing.T) {
	c := NewPaged(8, 4)
	a, b := &Handle{}, &Handle{}
	check := func(what string, used int32) {
		t.Helper()
		if err := c.Check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if c.Used() != used {
			t.Fatalf("%s: %d blocks used, want %d", what, c.Used(), used)
		}
	}
	c.Alloc(a, 3, 3)
	c.Register(a, []uint64{1, 2, 3}, 0, 3)
	c.Slide(a, 3)
	if a.Blocks() != 3 || a.Slide != 3 || a.Anon != 0 {
		t.Fatalf("handle %+v: want 3 full blocks and 3 sliding", *a)
	}
	check("3 full + 3 sliding", 6)
	c.Slide(a, -2) // two left the window
	check("2 sliding freed", 4)
	c.Release(a) // its 3 cached blocks stay findable
	check("released", 0)
	if c.Lookup([]uint64{1, 2, 3}, 3) != 3 {
		t.Fatal("released full-attention blocks should stay cached")
	}
	// 8 free: 5 anonymous (the sliding ones and the never used) ahead of
	// a's cached blocks, freed last block first. 6 sliding blocks evict one.
	c.Slide(b, 6)
	check("6 sliding", 6)
	if c.Evictions() != 1 || c.Lookup([]uint64{1, 2}, 2) != 2 {
		t.Fatalf("%d evictions, %d of a's first two blocks cached: want a's last block evicted", c.Evictions(), c.Lookup([]uint64{1, 2}, 2))
	}
	c.Release(b)
	check("all released", 0)
	if b.Slide != 0 || b.Blocks() != 0 {
		t.Fatalf("released handle %+v", *b)
	}
}

type nopObserver struct{}

func (nopObserver) Cached(uint64)  {}
func (nopObserver) Evicted(uint64) {}

// TestObserved checks the flag Observed reads against the observers it
// stands for, through installs, removals and clones (which drop both), and
// that the cache's fields fill a whole number of lines.
func TestObserved(t *testing.T) {
	c := NewPaged(64, 16)
	var o nopObserver
	for i, tc := range []struct {
		obs, low Observer
	}{{nil, nil}, {o, nil}, {nil, o}, {o, o}, {nil, nil}} {
		c.SetObserver(tc.obs)
		c.SetLower(tc.low)
		if want := tc.obs != nil || tc.low != nil; c.Observed() != want {
			t.Fatalf("case %d: Observed %v, want %v", i, c.Observed(), want)
		}
		if c.Clone().Observed() || c.CloneInto(NewPaged(8, 16)).Observed() {
			t.Fatalf("case %d: a clone is observed", i)
		}
	}
	if n := unsafe.Sizeof(Paged{}); n%64 != 0 {
		t.Fatalf("Paged is %d bytes, not a whole number of cache lines (its padding)", n)
	}
}

// QueueHead (a read-ahead's address) is the free queue's head entry, inside
// the queue, as blocks are taken and given back; nil only when the queue
// holds no entry.
func TestQueueHeadInBounds(t *testing.T) {
	c := NewPaged(8, 4)
	check := func(when string) {
		t.Helper()
		p := c.QueueHead()
		if c.qh >= len(c.q) {
			if p != nil {
				t.Fatalf("%s: head %p with no entry queued", when, p)
			}
			return
		}
		if p != unsafe.Pointer(&c.q[c.qh]) {
			t.Fatalf("%s: head %p, want entry %d at %p", when, p, c.qh, &c.q[c.qh])
		}
	}
	check("new")
	var hs [4]Handle
	for i := range hs {
		c.Alloc(&hs[i], 2, 2)
		c.Register(&hs[i], []uint64{uint64(2*i + 1), uint64(2*i + 2)}, 0, 2)
		check(fmt.Sprint("alloc ", i)) // the last takes the last free block
	}
	for i := range hs {
		c.Release(&hs[i])
		check(fmt.Sprint("release ", i))
	}
	var x Handle
	c.Alloc(&x, 3, 0) // evicts from the head
	check("evict")
	c.Release(&x)
	check("release evicted")
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// Keys keys engine block j by the source hash holding its last token and
// how far into that source block it ends (the formula of docs/engine.md,
// "Block keys"), at equal and unequal block sizes, for prompts the hashes
// cover wholly, partly and beyond.
func TestKeys(t *testing.T) {
	hashes := []uint64{11, 22, 33, 44, 55}
	for _, tc := range []struct {
		name           string
		input          int32
		prefix, block  int32
		wantBlocks     int
		wantFirstIndex int64 // source block of engine block 0
	}{
		{"equal sizes", 80, 16, 16, 5, 0},
		{"equal sizes, prompt shorter than the hashes", 50, 16, 16, 3, 0},
		{"equal sizes, a partial last block", 79, 16, 16, 4, 0},
		{"larger source blocks", 80, 32, 16, 5, 0},
		{"smaller source blocks", 80, 8, 16, 2, 1},
		{"no whole engine block", 10, 16, 16, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Keys(nil, hashes, tc.input, tc.prefix, tc.block)
			if len(got) != tc.wantBlocks {
				t.Fatalf("%d keys, want %d", len(got), tc.wantBlocks)
			}
			for j := range got {
				end := int64(j+1) * int64(tc.block)
				i := (end - 1) / int64(tc.prefix)
				k := end - i*int64(tc.prefix)
				if want := rng.Mix64(hashes[i] ^ uint64(k)*0x9E3779B97F4A7C15); got[j] != want {
					t.Fatalf("block %d: key %x, want %x (source block %d, %d tokens in)", j, got[j], want, i, k)
				}
				if j == 0 && i != tc.wantFirstIndex {
					t.Fatalf("engine block 0 keyed by source block %d, want %d", i, tc.wantFirstIndex)
				}
			}
		})
	}
	if got := Keys(nil, nil, 80, 16, 16); len(got) != 0 {
		t.Fatalf("no hashes: %d keys", len(got))
	}
}
