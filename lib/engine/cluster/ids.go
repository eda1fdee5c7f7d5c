package cluster

import (
	"hash/maphash"
	"unsafe"

	"github.com/blis-sim/blis/lib/engine/request"
)

// idIndex maps the IDs of the requests the cluster holds to their states.
// At 1,000 replicas tens of thousands are held at once, so a Go map's
// lookups are cache misses on its control words and its string keys; here
// a slot is a 64-bit hash of the ID beside the state, found by linear
// probing from its home: Inject's duplicate check and insert are one walk
// (a map needs a lookup and an assign), and a retired request is removed
// by its state's address without reading an ID's bytes. Only an equal hash
// compares IDs. The hash's seed is per process: layout and speed may vary
// between runs, nothing else (the index is never iterated in order).
type idIndex struct {
	slots []idSlot // a power of two, at most half full; nil until the first put
	n     int
	seed  maphash.Seed
}

type idSlot struct {
	h uint64
	r *request.State // nil: empty
}

func newIDIndex() idIndex { return idIndex{seed: maphash.MakeSeed()} }

func (x *idIndex) len() int { return x.n }

// get returns the state registered under id, or nil.
func (x *idIndex) get(id string) *request.State {
	if x.n == 0 {
		return nil
	}
	h := maphash.String(x.seed, id)
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.r == nil {
			return nil
		}
		if s.h == h && s.r.Req.ID == id {
			return s.r
		}
	}
}

// put registers r under r.Req.ID unless a state is registered under it
// already; it returns that state (nil when r was registered).
func (x *idIndex) put(r *request.State) *request.State {
	if 2*(x.n+1) > len(x.slots) {
		x.grow()
	}
	id := r.Req.ID
	h := maphash.String(x.seed, id)
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.r == nil {
			*s = idSlot{h, r}
			r.IDHash = h
			x.n++
			return nil
		}
		if s.h == h && s.r.Req.ID == id {
			return s.r
		}
	}
}

// remove drops r if it is registered under r.Req.ID, closing the gap by
// shifting later slots of its probe run back (no tombstones). r.IDHash is
// the hash put filed it under (a state never registered is looked for
// from any slot, and not found).
func (x *idIndex) remove(r *request.State) {
	if x.n == 0 {
		return
	}
	h := r.IDHash
	mask := uint64(len(x.slots) - 1)
	i := h & mask
	for x.slots[i].r != r {
		if x.slots[i].r == nil {
			return
		}
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := x.slots[j]
		if s.r == nil {
			break
		}
		// s may fill the hole at i unless its home lies cyclically in (i, j].
		if home := s.h & mask; (j-home)&mask >= (j-i)&mask {
			x.slots[i] = s
			i = j
		}
	}
	x.slots[i] = idSlot{}
	x.n--
}

// warm reads ahead the slot r, registered, is removed from (a hint: see
// prefetch).
func (x *idIndex) warm(r *request.State) {
	if len(x.slots) > 0 {
		x.warmHome(r.IDHash)
	}
}

// warmID reads ahead the home slot an ID not yet put would be filed in
// (a hint: see prefetch); put hashes it again. A small index stays in
// cache, and the hash would be spent for nothing.
func (x *idIndex) warmID(id string) {
	if len(x.slots) >= warmSlots {
		x.warmHome(maphash.String(x.seed, id))
	}
}

// warmHome reads ahead the home slot of hash h (slots not empty).
func (x *idIndex) warmHome(h uint64) {
	prefetch(unsafe.Pointer(&x.slots[h&uint64(len(x.slots)-1)]))
}

// warmSlots is the index size (16-byte slots: 64 KiB) from which warmID
// reads ahead.
const warmSlots = 4096

func (x *idIndex) grow() {
	old := x.slots
	x.slots = make([]idSlot, max(2*len(old), 1024))
	mask := uint64(len(x.slots) - 1)
	for _, s := range old {
		if s.r == nil {
			continue
		}
		i := s.h & mask
		for x.slots[i].r != nil {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// clone is a copy of x whose states are mapped by m (slots keep their
// places: the seed is shared).
func (x *idIndex) clone(m func(*request.State) *request.State) idIndex {
	d := idIndex{n: x.n, seed: x.seed}
	if x.slots != nil {
		d.slots = make([]idSlot, len(x.slots))
		for i, s := range x.slots {
			if s.r != nil {
				d.slots[i] = idSlot{s.h, m(s.r)}
			}
		}
	}
	return d
}
