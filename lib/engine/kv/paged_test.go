package kv

import "testing"

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
