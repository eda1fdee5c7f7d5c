package cluster

import (
	"unsafe"

	"github.com/blis-sim/blis/lib/engine/sched"
)

// Read-ahead over the step ends' heap (docs/engine.md, "Performance"). On
// a large fleet each step end lands on a replica whose memory was last
// touched about as many events ago as there are replicas, and its first
// touches form a chain — the Replica; its span's current run and its
// scheduler; the scheduler's finish heap, KV store and bucket heads; the
// store's free-queue head — each load waiting for the address the one
// before brings in. The next step ends are known a few events ahead, so
// each is taken one link further along its chain at every event, and the
// chain's misses overlap the events before it instead of one another. A
// guess that an event in between makes wrong only wastes prefetches:
// nothing here changes what the simulation computes.

// aheadReplicas is the fleet size from which the cluster reads ahead:
// below it every replica's state stays in cache and the read-ahead would
// only cost its instructions.
const aheadReplicas = 256

// aheadFrom is aheadReplicas, but for tests (export_test.go).
var aheadFrom = aheadReplicas

// aheadStages is the length of the chain read ahead (aheadTo's stages).
const aheadStages = 4

// prange is a range of n > 0 bytes at p to prefetch (prefetchRanges):
// addresses as integers, so that filling a stack array of them takes no
// write barriers (the objects stay reachable through the replicas).
type prange struct{ p, n uintptr }

// ahead runs when an event is done. The step ends' heap holds the next
// step end at its root, the one after among the root's two children, and
// the third among the other child and the second's children. Each is
// taken one stage further (aheadTo), the first up to the last stage, the
// second up to the one before, the third up to the one before that; a
// replica keeps the stage it reached (aheadLvl) until its step end is
// popped, so events that leave the heap as it was give the lines more
// time instead of asking again.
func (c *Cluster) ahead() {
	e := &c.h.ends
	s := e.s
	n := len(s)
	if n == 0 || e.held != 0 {
		return // (a replica's popped end still at the root: rare, skipped)
	}
	var r [8]prange
	k := c.aheadTo(r[:0], s[0].rep, aheadStages)
	if n > 1 {
		b, o := 1, 2 // the second, and the root's other child
		if n > 2 && s[2].less(&s[1]) {
			b, o = 2, 1
		}
		k = c.aheadTo(k, s[b].rep, aheadStages-1)
		t := -1 // the third
		if o < n {
			t = o
		}
		if l := 2*b + 1; l < n && (t < 0 || s[l].less(&s[t])) {
			t = l
		}
		if l := 2*b + 2; l < n && s[l].less(&s[t]) {
			t = l
		}
		if t >= 0 {
			k = c.aheadTo(k, s[t].rep, aheadStages-2)
		}
	}
	if len(k) > 0 {
		prefetchRanges(k)
	}
}

// aheadTo takes replica i's read-ahead one stage further, up to stage
// max, adding the stage's ranges to r. Each stage reads only lines the
// stage before asked for.
func (c *Cluster) aheadTo(r []prange, i int32, max uint8) []prange {
	l := c.aheadLvl[i]
	if l >= max {
		return r
	}
	c.aheadLvl[i] = l + 1
	rep := c.reps[i]
	if l == 0 {
		return append(r, prange{uintptr(unsafe.Pointer(rep)), unsafe.Sizeof(*rep)})
	}
	s, ok := rep.Sched.(*sched.VLLM)
	switch l {
	case 1:
		if p := rep.SpanRun(); p != nil {
			r = append(r, prange{uintptr(p), 1})
		}
		if ok {
			p, n := s.Hot()
			r = append(r, prange{uintptr(p), n})
		}
	case 2:
		if ok {
			fin, finN, store, heads, headsN := s.Reach()
			if fin != nil {
				r = append(r, prange{uintptr(fin), finN})
			}
			if store != nil {
				r = append(r, prange{uintptr(store), 1})
			}
			if heads != nil {
				r = append(r, prange{uintptr(heads), headsN})
			}
		}
	default:
		if ok {
			if p := s.QueueHead(); p != nil {
				r = append(r, prange{uintptr(p), 1})
			}
		}
	}
	return r
}
