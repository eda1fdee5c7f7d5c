package kv

import (
	"slices"
	"testing"

	"github.com/blis-sim/blis/lib/rng"
)

// TestUniqueMatchesPlain runs the same requests on two caches, one whose
// handles for requests with a first key of their own are Unique (private
// runs, placeholders) and one whose handles are all plain, and compares
// everything the scheduler can see after every operation: free blocks,
// evictions, the clean head, lookups of the shared prompts and of
// preempted requests' own prompts. Requests are admitted, registered in
// chunks, given decode and sliding-window blocks, preempted (Expose,
// release, then admitted again with their own hits) and ended.
func TestUniqueMatchesPlain(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		matchUnique(t, seed, 4000)
	}
}

// FuzzUniqueMatchesPlain is TestUniqueMatchesPlain from any seed.
func FuzzUniqueMatchesPlain(f *testing.F) {
	f.Add(uint64(11))
	f.Fuzz(func(t *testing.T, seed uint64) { matchUnique(t, seed, 600) })
}

func matchUnique(t *testing.T, seed uint64, ops int) {
	g := rng.New(seed, "paged-unique")
	const total = 40
	u, p := NewPaged(total, 16), NewPaged(total, 16)
	u.SetPrivate(true)
	p.SetPrivate(true) // (its handles are plain)
	type req struct {
		keys   []uint64
		hu, hp Handle
		reg    int
		unique bool
	}
	// Shared prompts: chains from a few first keys (requests reuse them);
	// a unique request's chain starts from a key no other has.
	shared := make([][]uint64, 4)
	for i := range shared {
		for j := range 1 + g.IntN(6) {
			shared[i] = append(shared[i], rng.Mix64(uint64(i)<<16|uint64(j)))
		}
	}
	next := uint64(1) << 40
	var live, preempted []*req
	fail := func(op int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d op %d: "+format, append([]any{seed, op}, args...)...)
	}
	admit := func(op int, r *req) bool {
		hu, hp := u.Lookup(r.keys, len(r.keys)), p.Lookup(r.keys, len(r.keys))
		if hu != hp {
			fail(op, "lookup %d, plain %d", hu, hp)
		}
		need := int32(len(r.keys) - hu)
		if cu, cp := u.HitCost(r.keys, hu), p.HitCost(r.keys, hp); cu != cp {
			fail(op, "hit cost %d, plain %d", cu, cp)
		}
		extra := int32(g.IntN(2)) // an anonymous block after the prompt's
		if p.Free() < need+extra+p.HitCost(r.keys, hp) {
			return false
		}
		u.Touch(&r.hu, r.keys, hu)
		p.Touch(&r.hp, r.keys, hp)
		u.Alloc(&r.hu, need+extra, need)
		p.Alloc(&r.hp, need+extra, need)
		r.reg = hu
		return true
	}
	for op := range ops {
		switch x := g.IntN(12); {
		case x < 4 && len(live) < 7: // a new request
			r := &req{}
			if g.IntN(3) == 0 {
				base := shared[g.IntN(len(shared))]
				r.keys = slices.Clone(base[:1+g.IntN(len(base))])
			} else {
				for range 1 + g.IntN(7) {
					r.keys = append(r.keys, next)
					next++
				}
				r.unique = true
				r.hu.Unique = true
			}
			if admit(op, r) {
				live = append(live, r)
			}
		case x < 5 && len(preempted) > 0: // a preempted request comes back
			i := g.IntN(len(preempted))
			if r := preempted[i]; admit(op, r) {
				live = append(live, r)
				preempted = slices.Delete(preempted, i, i+1)
			}
		case x < 8 && len(live) > 0: // a prefill chunk, or decode blocks
			r := live[g.IntN(len(live))]
			if r.reg < len(r.keys) && g.IntN(2) == 0 {
				n := min(1+g.IntN(3), len(r.keys)-r.reg)
				u.Register(&r.hu, r.keys, r.reg, r.reg+n)
				p.Register(&r.hp, r.keys, r.reg, r.reg+n)
				r.reg += n
			} else if n := min(int32(g.IntN(3)), p.AnonHead()); n > 0 && g.IntN(2) == 0 {
				if u.AnonHead() < n {
					fail(op, "anonymous head %d, plain %d", u.AnonHead(), p.AnonHead())
				}
				u.TakeAnon(n)
				p.TakeAnon(n)
				r.hu.Anon += n
				r.hp.Anon += n
			} else if n := int32(g.IntN(3)); g.IntN(3) == 0 && (n <= p.Free() || r.hp.Slide > 0) {
				if n > p.Free() || g.IntN(2) == 0 { // sliding-window blocks leave the window
					n = -min(n, r.hp.Slide)
				}
				if n != 0 {
					u.Slide(&r.hu, n)
					p.Slide(&r.hp, n)
				}
			} else if n := int32(g.IntN(3)); p.Free() >= n {
				u.Alloc(&r.hu, n, 0)
				p.Alloc(&r.hp, n, 0)
			}
		case x < 9 && len(live) > 0: // preempted: released, to look itself up again
			i := g.IntN(len(live))
			r := live[i]
			u.Expose(&r.hu, r.keys)
			p.Expose(&r.hp, r.keys)
			if r.hu.Unique {
				fail(op, "still Unique after Expose")
			}
			u.Release(&r.hu)
			p.Release(&r.hp)
			live = slices.Delete(live, i, i+1)
			preempted = append(preempted, r)
		case len(live) > 0: // a request ends
			i := g.IntN(len(live))
			u.Release(&live[i].hu)
			p.Release(&live[i].hp)
			live = slices.Delete(live, i, i+1)
		}
		if u.Free() != p.Free() || u.Evictions() != p.Evictions() || u.CleanFree() != p.CleanFree() || u.AnonHead() != p.AnonHead() {
			fail(op, "free %d evictions %d clean %d head %d, plain %d %d %d %d", u.Free(), u.Evictions(), u.CleanFree(), u.AnonHead(), p.Free(), p.Evictions(), p.CleanFree(), p.AnonHead())
		}
		for _, pr := range shared {
			if a, b := u.Lookup(pr, len(pr)), p.Lookup(pr, len(pr)); a != b {
				fail(op, "shared prompt: %d cached, plain %d", a, b)
			}
		}
		for _, r := range preempted {
			if a, b := u.Lookup(r.keys, len(r.keys)), p.Lookup(r.keys, len(r.keys)); a != b {
				fail(op, "preempted prompt: %d cached, plain %d", a, b)
			}
			for i := range r.keys {
				if a, b := u.Has(r.keys, i), p.Has(r.keys, i); a != b {
					fail(op, "preempted prompt: Has(%d) %v, plain %v", i, a, b)
				}
			}
		}
		if k, ok := u.Clash(); ok {
			fail(op, "clash on %x: no two requests share a first key", k)
		}
		for _, c := range []*Paged{u, p} {
			if err := c.Check(); err != nil {
				fail(op, "%v", err)
			}
		}
	}
}

// TestUniqueClash: a request that finds a Unique request's first key, and
// a Unique request that registers a key another holds, report the broken
// promise; an observed store keeps records for every handle.
func TestUniqueClash(t *testing.T) {
	keys := []uint64{7, 8, 9}
	c := NewPaged(16, 16)
	c.SetPrivate(true)
	a := Handle{Unique: true}
	c.Alloc(&a, 4, 3)
	c.Register(&a, keys, 0, 3)
	if len(c.b) != 1 || a.IDs[1] != reg || a.IDs[2] != reg {
		t.Fatalf("Unique handle: %d records, ids %v; want 1 record and registered placeholders", len(c.b), a.IDs)
	}
	if n := c.Lookup(keys, 3); n != 0 {
		t.Fatalf("lookup of a Unique request's keys found %d blocks", n)
	}
	if k, ok := c.Clash(); !ok || k != 7 {
		t.Fatalf("clash %x %v, want 7 true", k, ok)
	}

	c = NewPaged(16, 16)
	c.SetPrivate(true)
	var b Handle
	c.Alloc(&b, 3, 3)
	c.Register(&b, keys, 0, 3)
	a = Handle{Unique: true}
	c.Alloc(&a, 3, 3)
	c.Register(&a, keys, 0, 3)
	if k, ok := c.Clash(); !ok || k != 7 {
		t.Fatalf("clash %x %v, want 7 true", k, ok)
	}

	// A store not set private, and a private one somebody observes, keep
	// records for every handle.
	plain, observed := NewPaged(16, 16), NewPaged(16, 16)
	observed.SetPrivate(true)
	observed.SetObserver(nopObserver{})
	for name, c := range map[string]*Paged{"not private": plain, "observed": observed} {
		a = Handle{Unique: true}
		c.Alloc(&a, 3, 3)
		c.Register(&a, keys, 0, 3)
		if len(c.b) != 3 || c.Lookup(keys, 3) != 3 {
			t.Fatalf("%s store: %d records, lookup %d; want 3 and 3", name, len(c.b), c.Lookup(keys, 3))
		}
		if _, ok := c.Clash(); ok {
			t.Fatalf("%s store reported a clash", name)
		}
	}
}
