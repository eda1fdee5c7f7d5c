package sched

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/request"
)

// ring is a scheduler's block-boundary buckets packed in one array, bucket
// p in e[p·stride:][:h[p].n]. A step end, or a span's catching up, walks
// consecutive buckets: on a replica whose memory has gone cold (one of
// 1,000) they are consecutive cache lines, which the hardware prefetches,
// rather than one allocation per bucket and a slice header each.
//
// A bucket whose entries are all live and take anonymous blocks (the
// common case) is not read at all when its step comes: each of its
// entries takes one anonymous block, and which takes which does not
// matter, so the visit counts them (h[p].n) and raises h[p].gen, the
// blocks each of them has been given without being read.
type ring struct {
	e      []boundEntry
	h      []bucketHead
	stride int
}

// bucketHead is what a visit reads of a bucket before (or instead of) its
// entries: 12 bytes, five buckets to a cache line.
type bucketHead struct {
	n int32 // entries, stale ones included
	// slow counts the entries a visit must read: stale ones (dropped at
	// the next visit) and live ones with keyed blocks to come (ids > 0).
	slow int32
	// gen is added to each entry's anon (wrapping: only differences of
	// it count).
	gen int32
}

func newRing(B int32) ring { return ring{h: make([]bucketHead, B)} }

// at is bucket p.
func (g *ring) at(p int64) []boundEntry {
	o := int(p) * g.stride
	return g.e[o : o+int(g.h[p].n) : o+g.stride]
}

// add appends x, a live entry, to bucket p; a full bucket doubles every
// bucket's room.
func (g *ring) add(p int64, x boundEntry) {
	if int(g.h[p].n) == g.stride {
		stride := max(4, 2*g.stride)
		e := make([]boundEntry, len(g.h)*stride)
		for q := range g.h {
			copy(e[q*stride:], g.at(int64(q)))
		}
		g.e, g.stride = e, stride
	}
	g.e[int(p)*g.stride+int(g.h[p].n)] = x
	g.h[p].n++
	if x.ids > 0 {
		g.h[p].slow++
	}
}

// drop drops entry i of bucket p, a stale one, by moving the last entry
// into its place: a bucket is a set, visited whole.
func (g *ring) drop(p int64, i int) {
	b := g.at(p)
	last := len(b) - 1
	b[i] = b[last]
	b[last] = boundEntry{}
	g.h[p].n--
	g.h[p].slow--
}

// stale marks entry x of bucket p stale (its request stopped decoding).
func (g *ring) stale(p int64, x *boundEntry) {
	if x.ids == 0 {
		g.h[p].slow++ // (one with ids > 0 was counted already)
	}
	x.r = nil
}

// anon is the anonymous blocks of the request of entry x of bucket p.
func (g *ring) anon(p int64, x *boundEntry) int32 { return x.anon + g.h[p].gen }

// entryOf is r's entry in bucket p, from its State.
func (g *ring) entryOf(p int64, r *request.State) boundEntry {
	return boundEntry{r: r, anon: r.KV.Anon - g.h[p].gen, ids: idsLeft(r)}
}

// bind sets live entry x of bucket p from r's State (its KV handle up to
// date).
func (g *ring) bind(p int64, x *boundEntry, r *request.State) {
	y := g.entryOf(p, r)
	switch {
	case x.ids > 0 && y.ids == 0:
		g.h[p].slow--
	case x.ids == 0 && y.ids > 0:
		g.h[p].slow++
	}
	*x = y
}

// clone copies the ring with each live entry's request mapped.
func (g *ring) clone(c *request.Clone) ring {
	d := ring{e: make([]boundEntry, len(g.e)), h: append([]bucketHead(nil), g.h...), stride: g.stride}
	for p := range g.h {
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
// miss per request and block. anon plus its bucket's gen is the request's
// count of anonymous blocks, kept here while it decodes (r.KV.Anon is
// brought up to date when it stops, or when something else needs its
// handle: Progress); ids is how many more blocks carry cache keys
// (idsLeft). r is nil once the request stopped decoding (unbind): a stale
// entry, dropped when visited.
type boundEntry struct {
	r    *request.State
	anon int32
	ids  int32
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
	p := s.bucketOf(r)
	r.KV.Anon = s.bound.anon(p, x)
	s.bound.stale(p, x)
}

// checkBound checks the block-boundary buckets and the finish heap (without
// speculative decoding): one live entry in each per decoding request, the
// bucket's in the bucket of its boundaries and agreeing with its State.
func (s *VLLM) checkBound() error {
	live := 0
	for p := range s.bound.h {
		slow := int32(0)
		for i := range s.bound.at(int64(p)) {
			x := &s.bound.at(int64(p))[i]
			r := x.r
			if r == nil || x.ids > 0 {
				slow++
			}
			if r == nil {
				continue
			}
			live++
			anon := s.bound.anon(int64(p), x)
			switch {
			case !r.Decoding:
				return fmt.Errorf("step %d: request %s has a block-boundary entry but is not decoding", s.step, r.Req.ID)
			case s.bucketOf(r) != int64(p):
				return fmt.Errorf("step %d: request %s's block-boundary entry is in bucket %d, not its own", s.step, r.Req.ID, p)
			case anon < r.KV.Anon || x.ids != max(0, int32(len(r.Keys)-len(r.KV.IDs))-anon):
				return fmt.Errorf("step %d: request %s's block-boundary entry says %d anonymous blocks and %d keyed to come, its State at least %d and %d",
					s.step, r.Req.ID, anon, x.ids, r.KV.Anon, max(0, int32(len(r.Keys)-len(r.KV.IDs))-anon))
			}
		}
		if slow != s.bound.h[p].slow {
			return fmt.Errorf("step %d: block-boundary bucket %d has %d stale or keyed entries, its head says %d", s.step, p, slow, s.bound.h[p].slow)
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
	for i := range s.finishH.s[min(finRoot, len(s.finishH.s)):] {
		x := &s.finishH.s[finRoot+i]
		if x.r == nil {
			continue
		}
		if live++; !x.r.Decoding || stepOf(x, s.step) != x.r.S0+int64(x.r.Req.OutputTokens-x.r.Gen0) {
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
