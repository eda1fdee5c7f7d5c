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

// aheadHotBytes: a fleet reads ahead while its estimated working set
// (aheadGate) is at least this large, a few times a second-level cache
// and a good part of a server's last-level one. A lightly loaded fleet
// without prefix keys (bench/fleet.sh's 1,000 replicas at 96 req/s: ~500
// requests held, no block records) stays in cache, and reading ahead
// there cost 13% of its time; one holding tens of thousands of requests
// (12,000 req/s) or a full prefix cache on every replica (the day) does
// not, and gains. aheadHot is it, but for tests (export_test.go).
const aheadHotBytes = 8 << 20

var aheadHot = int64(aheadHotBytes)

// aheadPollEvents is how often (in events) aheadGate looks again.
const aheadPollEvents = 4096

// Bytes an estimate of the working set counts per request held (its State
// and its share of its replica's scheduler) and per KV block record (the
// record, its link and its free-queue entry; index slots are a chain's
// first block's alone, kv.Paged.Records).
const (
	aheadRequestBytes = 768
	aheadRecordBytes  = 28
)

// aheadStages is the length of the chain read ahead (aheadTo's stages).
const aheadStages = 4

// prange is a range of n > 0 bytes at p to prefetch (prefetchRanges):
// addresses as integers, so that filling a stack array of them takes no
// write barriers (the objects stay reachable through the replicas).
type prange struct{ p, n uintptr }

// aheadGate turns the read-ahead on while the fleet's working set is
// estimated at aheadHot bytes or more, and off below: then what the
// step ends touch is in cache, and reading it ahead only costs the
// instructions. The estimate is what grows with the load: requests held,
// and the KV block records the replicas' prefix caches have created.
func (c *Cluster) aheadGate() {
	c.aheadPoll = aheadPollEvents
	hot := int64(c.ids.len()) * aheadRequestBytes
	for _, rep := range c.reps {
		if hot >= aheadHot {
			break
		}
		if s, ok := rep.Sched.(*sched.VLLM); ok {
			hot += int64(s.KVRecords()) * aheadRecordBytes
		}
	}
	on := hot >= aheadHot
	if on && !c.aheadOn {
		clear(c.aheadLvl) // stages reached before it went off are stale
	}
	c.aheadOn = on
}

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
