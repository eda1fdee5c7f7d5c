package sched

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/request"
)

// ring is a scheduler's block-boundary buckets packed in one array, bucket
// p in e[p·stride:][:n[p]]. A step end, or a span's catching up, walks
// consecutive buckets: on a replica whose memory has gone cold (one of
// 1,000) they are consecutive cache lines, which the hardware prefetches,
// rather than one allocation per bucket and a slice header each.
type ring struct {
	e      []boundEntry
	n      []int32
	stride int
}

func newRing(B int32) ring { return ring{n: make([]int32, B)} }

// at is bucket p.
func (g *ring) at(p int64) []boundEntry {
	o := int(p) * g.stride
	return g.e[o : o+int(g.n[p]) : o+g.stride]
}

// add appends x to bucket p; a full bucket doubles every bucket's room.
func (g *ring) add(p int64, x boundEntry) {
	if int(g.n[p]) == g.stride {
		stride := max(4, 2*g.stride)
		e := make([]boundEntry, len(g.n)*stride)
		for q := range g.n {
			copy(e[q*stride:], g.at(int64(q)))
		}
		g.e, g.stride = e, stride
	}
	g.e[int(p)*g.stride+int(g.n[p])] = x
	g.n[p]++
}

// drop drops entry i of bucket p by moving the last entry into its place:
// a bucket is a set, visited whole.
func (g *ring) drop(p int64, i int) {
	b := g.at(p)
	last := len(b) - 1
	b[i] = b[last]
	b[last] = boundEntry{}
	g.n[p]--
}

// clone copies the ring with each live entry's request mapped.
func (g *ring) clone(c *request.Clone) ring {
	d := ring{e: make([]boundEntry, len(g.e)), n: append([]int32(nil), g.n...), stride: g.stride}
	for p := range g.n {
		o := p * g.stride
		for i, x := range g.at(int64(p)) {
			x.r = c.Map(x.r) // (nil: stale)
			d.e[o+i] = x
		}
	}
	return d
}

// boundEntry is a decoding request's place in its block-boundary bucket.
// It carries what a boundary step needs of the request, so that the step
// neither reads nor writes the request's State: at 1,000 replicas the
// States of decoding requests are tens of MB, and each touch was a cache
// miss per request and block. anon is the request's count of anonymous
// blocks, kept here while it decodes (r.KV.Anon is brought up to date when
// it stops, or when something else needs its handle: flush); ids is how
// many more blocks carry cache keys (idsLeft). r is nil once the request
// stopped decoding (unbind): a stale entry, dropped when visited.
type boundEntry struct {
	r    *request.State
	anon int32
	ids  int32
}

// bind is r's entry, from its State.
func bind(r *request.State) boundEntry {
	return boundEntry{r: r, anon: r.KV.Anon, ids: idsLeft(r)}
}

// idsLeft is how many blocks past those r holds carry cache keys
// (IDBlocks of any larger count).
func idsLeft(r *request.State) int32 {
	return max(0, int32(len(r.Keys))-r.KV.Blocks())
}

// bucketOf is decoding request r's bucket, fixed while it decodes: its
// boundaries are S0 − C0 + 1 plus multiples of the block size.
func (s *VLLM) bucketOf(r *request.State) int64 {
	B := int64(s.B)
	p := (r.S0 - int64(r.C0) + 1) % B
	if p < 0 {
		p += B
	}
	return p
}

// entry is the live entry of decoding request r (nil if none, a broken
// invariant).
func (s *VLLM) entry(r *request.State) *boundEntry {
	bucket := s.bound.at(s.bucketOf(r))
	for i := range bucket {
		if bucket[i].r == r {
			return &bucket[i]
		}
	}
	return nil
}

// unbind marks the entry of a request that stops decoding stale, bringing
// its KV handle up to date.
func (s *VLLM) unbind(r *request.State) {
	x := s.entry(r)
	if x == nil {
		if s.cfg.Checks && s.err == nil {
			s.err = fmt.Errorf("step %d: decoding request %s has no block-boundary entry", s.step, r.Req.ID)
		}
		return
	}
	r.KV.Anon = x.anon
	x.r = nil
}

// checkBound checks the block-boundary buckets and the finish heap (without
// speculative decoding): one live entry in each per decoding request, the
// bucket's in the bucket of its boundaries and agreeing with its State.
func (s *VLLM) checkBound() error {
	live := 0
	for p := range s.bound.n {
		for _, x := range s.bound.at(int64(p)) {
			r := x.r
			if r == nil {
				continue
			}
			live++
			switch {
			case !r.Decoding:
				return fmt.Errorf("step %d: request %s has a block-boundary entry but is not decoding", s.step, r.Req.ID)
			case s.bucketOf(r) != int64(p):
				return fmt.Errorf("step %d: request %s's block-boundary entry is in bucket %d, not its own", s.step, r.Req.ID, p)
			case x.anon < r.KV.Anon || x.ids != max(0, int32(len(r.Keys)-len(r.KV.IDs))-x.anon):
				return fmt.Errorf("step %d: request %s's block-boundary entry says %d anonymous blocks and %d keyed to come, its State at least %d and %d",
					s.step, r.Req.ID, x.anon, x.ids, r.KV.Anon, max(0, int32(len(r.Keys)-len(r.KV.IDs))-x.anon))
			}
		}
	}
	if s.spec != nil {
		return nil
	}
	if live != s.nDecode {
		return fmt.Errorf("step %d: %d live block-boundary entries for %d decoding requests", s.step, live, s.nDecode)
	}
	// Finish entries are marked stale too (forget): the live ones are the
	// decoding requests', one each.
	live = 0
	for _, x := range s.finishH.S {
		if x.r == nil {
			continue
		}
		if live++; !x.r.Decoding || x.epoch != x.r.Epoch {
			return fmt.Errorf("step %d: request %s has a live finish entry but is not decoding, or has moved on", s.step, x.r.Req.ID)
		}
	}
	if live != s.nDecode {
		return fmt.Errorf("step %d: %d live finish entries for %d decoding requests", s.step, live, s.nDecode)
	}
	if s.win != nil {
		decoding := s.nDecode
		if s.spec != nil {
			decoding = 0 // speculative decoders are not counted (Form)
		}
		return s.win.check(s.step, decoding)
	}
	return nil
}
