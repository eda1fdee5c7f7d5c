package kv

import (
	"slices"
	"testing"

	"github.com/blis-sim/blis/lib/rng"
)

// refPool is vLLM v1's block pool written plainly, as a reference for
// Paged: every block has an id, the free queue is a list of ids, the cache
// a map from key to block.
type refPool struct {
	key       []uint64
	hashed    []bool
	ref       []int
	free      []int
	idx       map[uint64]int
	evictions int64
}

func newRefPool(n int) *refPool {
	p := &refPool{key: make([]uint64, n), hashed: make([]bool, n), ref: make([]int, n), idx: map[uint64]int{}}
	for i := range n {
		p.free = append(p.free, i)
	}
	return p
}

func (p *refPool) alloc(h *[]int, n int) {
	for range n {
		id := p.free[0]
		p.free = p.free[1:]
		if p.hashed[id] {
			delete(p.idx, p.key[id])
			p.hashed[id] = false
			p.evictions++
		}
		p.ref[id] = 1
		*h = append(*h, id)
	}
}

func (p *refPool) release(h *[]int) {
	for i := len(*h) - 1; i >= 0; i-- {
		id := (*h)[i]
		if p.ref[id]--; p.ref[id] == 0 {
			p.free = append(p.free, id)
		}
	}
	*h = (*h)[:0]
}

func (p *refPool) touch(h *[]int, keys []uint64, n int) {
	for _, k := range keys[:n] {
		id := p.idx[k]
		if p.ref[id] == 0 {
			p.free = slices.DeleteFunc(p.free, func(x int) bool { return x == id })
		}
		p.ref[id]++
		*h = append(*h, id)
	}
}

func (p *refPool) register(h []int, keys []uint64, from, to int) {
	for j := from; j < to; j++ {
		id := h[j]
		if p.hashed[id] {
			continue
		}
		if _, ok := p.idx[keys[j]]; ok {
			continue
		}
		p.idx[keys[j]] = id
		p.key[id], p.hashed[id] = keys[j], true
	}
}

func (p *refPool) lookup(keys []uint64) int {
	for i, k := range keys {
		if _, ok := p.idx[k]; !ok {
			return i
		}
	}
	return len(keys)
}

func (p *refPool) hitCost(keys []uint64, n int) int32 {
	var c int32
	for _, k := range keys[:n] {
		if p.ref[p.idx[k]] == 0 {
			c++
		}
	}
	return c
}

// TestPagedMatchesReference drives Paged and the reference with the same
// requests (hits, prompt blocks registered in chunks, decode blocks,
// releases) and compares what they answer after every operation. Keys are
// prefix-chained and drawn so that many share a home slot in the index,
// many share its fingerprint, and prompts share prefixes and diverge, so
// stale entries, fingerprint matches, linked and loose blocks, and blocks
// evicted and re-registered under the same key all happen. The index's fingerprints are also cut to one bit, as in a cache
// of 2^30 blocks, so that almost every probe matches one.
func TestPagedMatchesReference(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		for _, fpBits := range []uint32{0, 1} {
			matchReference(t, seed, fpBits, 4000)
		}
	}
}

// FuzzPagedMatchesReference is TestPagedMatchesReference from any seed.
func FuzzPagedMatchesReference(f *testing.F) {
	f.Add(uint64(7), uint8(0))
	f.Add(uint64(8), uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, fpBits uint8) {
		matchReference(t, seed, uint32(fpBits%27), 500)
	})
}

// matchReference runs ops operations of seed's requests on Paged and the
// reference; fpBits, when not 0, narrows the index's fingerprints.
func matchReference(t *testing.T, seed uint64, fpBits uint32, ops int) {
	g := rng.New(seed, "paged-model")
	const total = 48
	c := NewPaged(total, 16)
	if fpBits != 0 {
		c.idx.fpBits = fpBits
	}
	c.qbase = -uint32(1000 * seed) // queue positions wrap past 2^32 early on
	p := newRefPool(total)
	type req struct {
		keys []uint64
		h    Handle
		ref  []int
		reg  int // prompt blocks registered
	}
	key := func() uint64 {
		switch g.IntN(3) {
		case 0: // one home slot, few fingerprints
			return uint64(g.IntN(4))<<32 | uint64(g.IntN(6))
		case 1: // spread
			return rng.Mix64(uint64(g.IntN(60)))
		default: // fingerprint clashes across homes
			return uint64(g.Uint32())<<32 | 7
		}
	}
	// Keys are prefix-chained (docs/tables.md): a key names its whole
	// prefix, so each (previous key, next block) gets a key of its own,
	// drawn as above and never reused. Few choices a block make prompts
	// share prefixes and diverge.
	type edge struct {
		prev   uint64
		first  bool
		choice int
	}
	chain, used := map[edge]uint64{}, map[uint64]bool{}
	child := func(prev []uint64, choice int) uint64 {
		e := edge{first: len(prev) == 0, choice: choice}
		if !e.first {
			e.prev = prev[len(prev)-1]
		}
		if k, ok := chain[e]; ok {
			return k
		}
		k := key()
		for used[k] {
			k = key()
		}
		used[k], chain[e] = true, k
		return k
	}
	prompts := make([][]uint64, 12)
	for i := range prompts {
		for range 1 + g.IntN(8) {
			prompts[i] = append(prompts[i], child(prompts[i], g.IntN(3)))
		}
	}
	var live []*req
	register := func(r *req) {
		n := min(1+g.IntN(3), len(r.keys)-r.reg)
		c.Register(&r.h, r.keys, r.reg, r.reg+n)
		p.register(r.ref, r.keys, r.reg, r.reg+n)
		r.reg += n
	}
	for op := range ops {
		switch x := g.IntN(10); {
		case x < 4 && len(live) < 8: // a new request: hits, then its prompt blocks
			base := prompts[g.IntN(len(prompts))]
			keys := slices.Clone(base[:1+g.IntN(len(base))])
			if g.IntN(3) == 0 {
				keys = append(keys, child(keys, 3+g.IntN(4)))
			}
			r := &req{keys: keys}
			hits := c.Lookup(keys, len(keys))
			if want := p.lookup(keys); hits != want {
				t.Fatalf("seed %d fp %d op %d: lookup %d, reference %d", seed, fpBits, op, hits, want)
			}
			need := int32(len(keys) - hits)
			if c.Free() < need+c.HitCost(keys, hits) {
				continue
			}
			c.Touch(&r.h, keys, hits)
			p.touch(&r.ref, keys, hits)
			c.Warm(keys[hits:]) // a hint: the reference has no counterpart
			// Its prompt blocks at once, registered a chunk at a time,
			// now and in later operations (chunked prefill): requests
			// with the same prompt then register the same keys.
			c.Alloc(&r.h, need, need)
			p.alloc(&r.ref, int(need))
			r.reg = hits
			if g.IntN(2) == 0 {
				register(r)
			}
			live = append(live, r)
		case x < 7 && len(live) > 0: // a prefill chunk, or decode blocks
			r := live[g.IntN(len(live))]
			if r.reg < len(r.keys) && g.IntN(2) == 0 {
				register(r)
			} else if n := min(int32(g.IntN(3)), c.AnonHead()); n > 0 && g.IntN(2) == 0 {
				c.TakeAnon(n) // as a leap takes them
				r.h.Anon += n
				p.alloc(&r.ref, int(n))
			} else if n := int32(g.IntN(3)); c.Free() >= n {
				c.Alloc(&r.h, n, 0)
				p.alloc(&r.ref, int(n))
			}
		case len(live) > 0: // a request ends
			i := g.IntN(len(live))
			c.Release(&live[i].h)
			p.release(&live[i].ref)
			live = slices.Delete(live, i, i+1)
		}
		if c.Free() != int32(len(p.free)) || c.Evictions() != p.evictions {
			t.Fatalf("seed %d fp %d op %d: free %d evictions %d, reference %d and %d", seed, fpBits, op, c.Free(), c.Evictions(), len(p.free), p.evictions)
		}
		clean := int32(0) // free blocks ahead of the first cached one
		for _, id := range p.free {
			if p.hashed[id] {
				break
			}
			clean++
		}
		if c.AnonHead() > c.CleanFree() || c.CleanFree() > clean {
			t.Fatalf("seed %d fp %d op %d: head run %d, clean %d, reference clean %d", seed, fpBits, op, c.AnonHead(), c.CleanFree(), clean)
		}
		for _, pr := range prompts {
			n := c.Lookup(pr, len(pr))
			if want := p.lookup(pr); n != want || c.HitCost(pr, n) != p.hitCost(pr, n) {
				t.Fatalf("seed %d fp %d op %d: prompt %x: %d cached (cost %d), reference %d (cost %d)", seed, fpBits, op, pr, n, c.HitCost(pr, n), want, p.hitCost(pr, want))
			}
			for _, i := range []int{len(pr) - 1, n, len(pr) / 2} { // (Has remembers its last answer's predecessor)
				_, want := p.idx[pr[min(i, len(pr)-1)]]
				if i >= len(pr) {
					want = false
				}
				if got := c.Has(pr, i); got != want {
					t.Fatalf("seed %d fp %d op %d: prompt %x: Has(%d) %v, reference %v", seed, fpBits, op, pr, i, got, want)
				}
			}
		}
		if err := c.Check(); err != nil {
			t.Fatalf("seed %d fp %d op %d: %v", seed, fpBits, op, err)
		}
	}
}
