package request

import "testing"

// A clone maps each original to one copy (through the stamp, not a map),
// fixes the pointers between copies, keeps no slice of the original's that
// the copy could write, and can be reused once its copies are dead.
func TestCloneStampsAndReuse(t *testing.T) {
	a, b := &State{Epoch: 1}, &State{Epoch: 7}
	a.Rare().Children = []*State{b}
	a.RNext, b.RPrev = b, a
	a.Keys, a.KV.IDs = []uint64{1, 2, 3}, []int32{4, 5}
	c := NewClone()
	var second *Clone
	for round := 0; round < 3; round++ {
		ca := c.Map(a)
		if c.Map(a) != ca || ca == a {
			t.Fatalf("round %d: Map(a) twice gave %p and %p (original %p)", round, ca, c.Map(a), a)
		}
		c.Finish()
		if second == nil {
			// Another clone (after this one is built) makes its own copy.
			second = NewClone()
			if sa := second.Map(a); sa == ca || sa == a || sa.Epoch != 1 {
				t.Fatal("a second clone returned the first clone's copy or the original")
			}
		}
		cb := c.Map(b)
		if ca.Children()[0] != cb || ca.RNext != cb || cb.RPrev != ca || cb.Epoch != 7 {
			t.Fatalf("round %d: pointers not fixed: children %v, next %p, prev %p (copies %p %p)", round, ca.Children(), ca.RNext, cb.RPrev, ca, cb)
		}
		ca.Keys[0], ca.KV.IDs[0], ca.Rare().ReadyAt = 99, 99, 99
		if a.Keys[0] != 1 || a.KV.IDs[0] != 4 || a.ReadyAt() == 99 || a.Children()[0] != b {
			t.Fatal("writing the copy's keys, block ids or rare part changed the original's")
		}
		if cap(ca.KV.IDs) != len(ca.KV.IDs) || cap(ca.Keys) != len(ca.Keys) {
			t.Fatal("a copy's slices are not full: an append would write into the next copy's")
		}
		// Stale scheduler entries map to a tombstone they stay stale against.
		if r, ep := c.MapEntry(b, 6); ep == r.Epoch || r == b {
			t.Fatalf("a stale entry mapped to %p with epoch %d = its %d", r, ep, r.Epoch)
		}
		if r, ep := c.MapEntry(b, 7); r != cb || ep != 7 {
			t.Fatal("a live entry did not map to the copy")
		}
		c.Reset(-1)
	}
}
