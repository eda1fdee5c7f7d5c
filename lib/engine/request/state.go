// Package request holds the state of one request in flight, shared by the
// rooms of the engine: the cluster owns its lifecycle (dependencies, router,
// timestamps, result), a replica's scheduler its progress and KV.
//
// States are pooled by the cluster: memory grows with requests in flight,
// not with the trace. A pointer to a State is therefore only meaningful
// together with its Epoch, which changes whenever the State stops being
// what an earlier reference meant (finished, preempted, cancelled, reused).
package request

import (
	"math"
	"sync/atomic"

	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Phase is where a request is in its lifecycle.
type Phase uint8

// Phases, in lifecycle order.
const (
	Pending  Phase = iota // waiting for dependencies
	Arriving              // arrival event scheduled (or delayed by admission)
	Routed                // routed, in the alpha queueing delay
	Waiting               // in a replica's waiting queue
	Running               // in a replica's running set
	Tool                  // a tool timer is running
	Done                  // terminal; result written
	// Transfer: prefilled on a prefill replica, its KV waiting for or in
	// transfer to a decode replica (disaggregated serving).
	Transfer
)

// State is one request in flight.
//
// Its fields are laid out by who touches them, densest first: what a
// scheduler reads and writes while the request is queued, admitted and
// decoding; then what the cluster keeps through its lifecycle; then what
// only its result row reads (timestamps, status, the request's own
// columns). The layout leaves no padding holes, and what most requests
// never set (dependencies, a client timeout or cap, a failed admission) is
// in Rare, allocated on first use: at 12,000 req/s on 1,000 replicas about
// 54,000 States are live at once, and each byte is one the run faults in,
// the collector walks and the caches hold.
type State struct {
	// The fields a scheduler touches on every step a decoding request
	// crosses a block boundary come first, together: at 1,000 replicas the
	// live states are tens of MB, and each scattered field was a cache miss.
	Epoch    uint32
	Computed int32 // prompt/recompute tokens whose KV exists
	KV       kv.Handle
	Keys     []uint64 // prefix-cache key per full prompt block (see Keyer)
	KeysB    int32    // block size Keys were derived for; 0 = not derived
	NReg     int32    // leading blocks already registered in the prefix cache
	Chunk    int32    // tokens scheduled in the current step

	// Progress on a replica (owned by its scheduler).
	Gen0     int32 // generated tokens at decode start
	Decoding bool
	Phase    Phase
	SpecC    uint8 // speculative decoding's acceptance class (its scheduler's)
	// Cancel marks a running request whose client gave up while its
	// replica was mid-step: the scheduler drops it when the step ends.
	Cancel bool
	// Holder: waiting with its KV in hand (loaded from a lower tier, or
	// arrived from a prefill replica): first in the waiting order.
	Holder bool
	// PrefillOnly: a disaggregated request on its prefill replica, which
	// runs the prompt only and hands the request over (phase Transfer).
	PrefillOnly bool
	// Failed: an admission failed (Rare holds what it failed against).
	Failed bool
	// Encoded: its images were encoded on an encode replica (E/P/D) and
	// their embeddings are on their way to, or at, its prefill replica.
	Encoded bool
	LoRA    uint16 // LoRA adapter number on its replica (its scheduler's; 0 = base model)
	// ClientSlot: it holds one of the client's slots (see ClientWait).
	ClientSlot, ClientQueued bool
	C0                       int32   // computed tokens at decode start
	S0                       int64   // step that completed the prefill (decode start); with speculative decoding, the class's token clock then
	Prio                     float64 // priority score in the waiting queue (larger first; not NaN)
	Order                    int64   // waiting-queue order: enqueue counter, or negative after preemption
	WIdx                     int32   // index in the waiting heap, -1 when not in it
	Replica                  int32   // cluster-wide replica index, -1 until routed
	RPrev, RNext             *State  // a replica's running list (admission order)

	Preemptions, CachedTok, Generated int32
	// Life changes only when the State is reused for another request: an
	// event that names a State with another Life is stale.
	Life uint32

	// Tier is the tiered-KV part's state of the request (its scheduler's),
	// allocated at its first load from a lower tier and kept with the State
	// when it is reused; PD is the disaggregation part's (the cluster's),
	// allocated when it is placed on a prefill replica. Nil otherwise:
	// requests of a run without those features carry no bytes for them.
	Tier *TierLoad
	PD   *Handoff

	// rare: see Rare (nil until first needed; kept when the State is reused).
	rare *Rare

	// Dependencies (owned by the cluster; the rest are in Rare).
	Pending int32 // dependencies not yet finished
	Retired bool  // in the retirement heap (or past it)
	RootArr int64 // arrival of the root this request hangs off (streaming retention)

	LPrev, LNext *State // the cluster's live list (registration order)

	// The result row's (written by the cluster as the request moves on).
	Admitted, Routed, Enqueued, FirstSched, FirstTok, Finished int64
	Status                                                     string
	Reason                                                     string

	// A Clone's forwarding stamp: this State's copy is the clone's copy
	// number cidx when cgen is the clone's generation (no map lookups).
	cgen uint32
	cidx int32
	// IDHash is the hash the cluster's ID index filed Req.ID under (its
	// own seed), kept so that a finished request's slot can be found, and
	// read ahead, without reading the ID's bytes.
	IDHash uint64

	Row int64 // 1-based row in the input, for errors
	Req row.Request
}

// Rare is the part of a request's state most requests never set, apart so
// that the others carry no bytes for it.
type Rare struct {
	Children []*State // requests waiting on this one
	ReadyAt  int64    // latest dependency finish seen (math.MinInt64: none)
	Deadline int64    // client timeout (absolute µs), row.Null if none
	// The client's in-flight cap (cluster/client.go): ClientWait is
	// row.Null without a cap; while ClientQueued it holds the time the
	// request became due, once sent the µs it waited for a slot.
	ClientWait int64
	// A failed admission (State.Failed) stays failed until a block is freed
	// or evicted (a shorter hit takes fewer blocks out of the free queue),
	// the next prompt block becomes cached, or the step has less token
	// budget left (a smaller chunk needs fewer blocks); cache hits taken by
	// others never turn a failure into a success. The scheduler skips
	// re-checking it until then.
	FailFree  int32
	FailLeft  int32
	FailHits  int
	FailEvict int64
}

func (x *Rare) reset() {
	*x = Rare{Children: x.Children[:0], ReadyAt: math.MinInt64, Deadline: row.Null, ClientWait: row.Null}
}

// Rare returns r's rare part for writing, allocating it on first use.
func (r *State) Rare() *Rare {
	if r.rare == nil {
		r.rare = &Rare{}
		r.rare.reset()
	}
	return r.rare
}

// Children is the requests waiting on r.
func (r *State) Children() []*State {
	if r.rare == nil {
		return nil
	}
	return r.rare.Children
}

// ReadyAt is the latest finish of r's dependencies seen (math.MinInt64:
// none).
func (r *State) ReadyAt() int64 {
	if r.rare == nil {
		return math.MinInt64
	}
	return r.rare.ReadyAt
}

// Deadline is r's client timeout (absolute µs), row.Null if none.
func (r *State) Deadline() int64 {
	if r.rare == nil {
		return row.Null
	}
	return r.rare.Deadline
}

// ClientWait is Rare.ClientWait (row.Null without a client cap).
func (r *State) ClientWait() int64 {
	if r.rare == nil {
		return row.Null
	}
	return r.rare.ClientWait
}

// Reset readies a pooled State for a new request, keeping its buffers.
func (r *State) Reset() {
	tier, pd, rare := r.Tier, r.PD, r.rare
	if tier != nil {
		tier.reset()
	}
	if pd != nil {
		pd.reset()
	}
	if rare != nil {
		rare.reset()
	}
	ids, keys, epoch, life := r.KV.IDs[:0], r.Keys[:0], r.Epoch+1, r.Life+1
	// Cleared, then set in place: a composite literal would be built
	// aside and copied over.
	*r = State{}
	r.KV.IDs, r.Keys, r.Tier, r.PD, r.rare = ids, keys, tier, pd, rare
	r.Epoch, r.Life, r.Replica, r.WIdx = epoch, life, -1, -1
	r.Admitted, r.Routed, r.Enqueued = row.Null, row.Null, row.Null
	r.FirstSched, r.FirstTok, r.Finished = row.Null, row.Null, row.Null
}

// TierLoad is a request's loads from lower KV tiers (the scheduler's).
type TierLoad struct {
	// Loading: blocks are on their way to the GPU; the request holds GPU
	// blocks for LoadFrom+LoadN keys and re-enters the waiting queue at
	// LoadReady.
	Loading   bool
	LoadFrom  int32
	LoadN     int32
	LoadReady int64
	// Cached is the prompt tokens its first scheduling reloaded, per lower
	// tier (in the deployment's tier order).
	Cached    []int32
	ReloadUS  int64 // time from the loads' start to their end
	ThrashTok int32 // reloaded tokens whose blocks ping-ponged (see kv.Tiers)
}

func (t *TierLoad) reset() { *t = TierLoad{Cached: t.Cached[:0]} }

// CachedSum is the prompt tokens reloaded from all lower tiers.
func (t *TierLoad) CachedSum() int32 {
	var n int32
	for _, c := range t.Cached {
		n += c
	}
	return n
}

// Handoff is a disaggregated request's KV hand-off (the cluster's P/D
// part): the prefill replica runs the prompt, XferKV is its blocks there
// while the KV moves to DReplica, whose blocks are the request's KV. With
// granularity chunk or stream the decode blocks are reserved while the
// prefill runs: until its end they are XferKV, and KV is the prefill
// replica's.
type Handoff struct {
	XferQueued bool  // asked the decode replica for blocks (in its incoming queue or reserved)
	XferTok    int32 // prompt tokens whose KV has been put on the link
	PReplica   int32 // prefill replica, -1 if none
	DReplica   int32 // decode replica, -1 until chosen
	XferKV     kv.Handle
	XferStart  int64 // the prefill's end (before it: when the decode blocks were asked for)
	XferRes    int64 // the decode replica reserved its blocks
	XferBP     int64 // waited for the decode replica's blocks (backpressure)
	XferSendAt int64 // the link started sending the last piece
	XferFirst  int64 // the link finished sending the last piece's first layer
	XferEnd    int64 // the link finished sending the last piece: the last byte left
	XferReady  int64 // the decode replica may schedule the request (= XferDone unless pipelined)
	XferDone   int64 // the last byte arrived
	XferBytes  int64
	XferWaitUS int64 // prefill end to the last piece's start (decode blocks, link queue), >= 0
	// Fair link sharing: the request's flows in progress, and whether the
	// whole prompt is on the links (its transfer ends with its last flow).
	Flows    int32
	XferLast bool
	// Bound: counted among the requests bound to DReplica that have not
	// reached it (a draining decode replica waits for them).
	Bound bool
}

func (t *Handoff) reset() {
	*t = Handoff{XferKV: kv.Handle{IDs: t.XferKV.IDs[:0]}, PReplica: -1, DReplica: -1, XferStart: row.Null, XferDone: row.Null}
}

// IsPD reports whether r was placed on a prefill replica.
func (r *State) IsPD() bool { return r.PD != nil && r.PD.PReplica >= 0 }

// NewHandoff gives r its hand-off state (kept with the State for reuse).
func (r *State) NewHandoff() *Handoff {
	if r.PD == nil {
		r.PD = &Handoff{}
	}
	r.PD.reset()
	return r.PD
}

// NewTierLoad gives r its tiered-KV state for n lower tiers (kept with the
// State for reuse).
func (r *State) NewTierLoad(n int) *TierLoad {
	if r.Tier == nil {
		r.Tier = &TierLoad{}
	}
	t := r.Tier
	if cap(t.Cached) < n {
		t.Cached = make([]int32, n)
	}
	t.Cached = t.Cached[:n]
	clear(t.Cached)
	return t
}

// NumTokens is the tokens whose KV the request needs computed before it can
// decode: its prompt plus what it has generated (recomputed after a
// preemption).
func (r *State) NumTokens() int32 { return r.Req.InputTokens + r.Generated }

// IDBlocks is how many of n new blocks after the ones held carry cache keys.
func (r *State) IDBlocks(n int32) int32 {
	have := r.KV.Blocks()
	return max(0, min(int32(len(r.Keys)), have+n)-have)
}

// Clone copies states and fixes the pointers between them. Every State
// reachable from the structures being cloned must go through Map (or
// MapEntry). A Clone is reusable: Reset starts the next one over the same
// memory, so a caller that forks often (counterfactual regret) neither
// allocates nor zeroes a slab per fork. Copies of the previous use are
// overwritten: Reset only when they are dead.
//
// An original is found again through a forwarding stamp it carries (the
// clone's generation and the copy's number), not a map; the stamp is
// checked against the copy's original, so a stale stamp is never trusted.
// A State holds one stamp: clones of the same states are built one after
// the other, never interleaved (nor from two goroutines).
type Clone struct {
	gen   uint32
	src   []*State // originals, by copy number
	order []*State // their copies
	// Home, when >= 0, restricts the clone to one replica (a restricted
	// fork): a copied request running or queued on another replica (an
	// engine's stale reference) gets no links, children or list pointers.
	Home int32
	// Copies and their slices are carved from chunks kept across uses.
	slabs [][]State
	slab  int // slabs[slab][used:] is free
	used  int
	ids   arena[int32]
	keys  arena[uint64]
	kids  arena[*State]
	rares slabs[Rare]
	pds   slabs[Handoff]
	tiers slabs[TierLoad]
	tomb  State
}

var cloneGen atomic.Uint32

// NewClone starts a clone of the whole cluster's states.
func NewClone() *Clone {
	c := &Clone{}
	c.Reset(-1)
	return c
}

// NewCloneN starts a clone of about n states.
func NewCloneN(n int) *Clone {
	c := &Clone{src: make([]*State, 0, n), order: make([]*State, 0, n)}
	c.Reset(-1)
	return c
}

// Reset starts a new clone over the memory of the previous ones (whose
// copies must no longer be used); home is as Clone.Home.
func (c *Clone) Reset(home int32) {
	c.gen = cloneGen.Add(1)
	if c.gen == 0 {
		c.gen = cloneGen.Add(1)
	}
	clear(c.src)
	c.src, c.order = c.src[:0], c.order[:0]
	c.slab, c.used = 0, 0
	c.ids.reset()
	c.keys.reset()
	c.kids.reset()
	c.rares.reset()
	c.pds.reset()
	c.tiers.reset()
	c.Home = home
}

// Copies returns the copies made so far, in the order they were made.
func (c *Clone) Copies() []*State { return c.order }

// Foreign reports whether copy d is a request on another replica than a
// restricted clone's home (reached only through a stale reference).
func (c *Clone) Foreign(d *State) bool {
	return c.Home >= 0 && d.Replica >= 0 && d.Replica != c.Home && d.Phase != Done
}

const slabStates = 128

func (c *Clone) alloc() *State {
	for {
		if c.slab == len(c.slabs) {
			c.slabs = append(c.slabs, make([]State, slabStates))
		}
		if s := c.slabs[c.slab]; c.used < len(s) {
			c.used++
			return &s[c.used-1]
		}
		c.slab, c.used = c.slab+1, 0
	}
}

// Map returns the copy of r (nil for nil), creating it on first sight.
// Pointer fields of copies are fixed by Finish.
func (c *Clone) Map(r *State) *State {
	if r == nil {
		return nil
	}
	if r.cgen == c.gen {
		if i := int(r.cidx); i < len(c.src) && c.src[i] == r {
			return c.order[i]
		}
	}
	d := c.alloc()
	*d = *r
	d.cgen, d.cidx = 0, 0
	d.KV.IDs = c.ids.copy(r.KV.IDs)
	if r.PD != nil {
		x := c.pds.alloc()
		*x = *r.PD
		x.XferKV.IDs = c.ids.copy(r.PD.XferKV.IDs)
		d.PD = x
	}
	if r.Tier != nil {
		x := c.tiers.alloc()
		*x = *r.Tier
		x.Cached = c.ids.copy(r.Tier.Cached)
		d.Tier = x
	}
	if r.rare != nil {
		x := c.rares.alloc()
		*x = *r.rare
		x.Children = c.kids.copy(r.rare.Children)
		d.rare = x
	}
	d.Keys = c.keys.copy(r.Keys)
	// The request's own columns are never written by the engine: the
	// copy shares them.
	r.cgen, r.cidx = c.gen, int32(len(c.src))
	c.src = append(c.src, r)
	c.order = append(c.order, d)
	return d
}

// MapEntry maps a scheduler entry (a request and the epoch it was made
// at): a stale entry (the request has moved on since) maps to a tombstone
// it stays stale against, so the copy never holds a request it does not
// need.
func (c *Clone) MapEntry(r *State, epoch uint32) (*State, uint32) {
	if r.Epoch != epoch {
		return &c.tomb, c.tomb.Epoch + 1
	}
	return c.Map(r), epoch
}

// Finish maps the pointers inside every copy; it may create more copies
// (a child only reachable through its parent), which join the walk. A
// restricted clone (Home >= 0) leaves the live-list links nil (its owner
// links the copies it keeps) and cuts a foreign copy's links.
func (c *Clone) Finish() {
	for i := 0; i < len(c.order); i++ {
		d := c.order[i]
		if c.Home >= 0 {
			d.LPrev, d.LNext = nil, nil
			if c.Foreign(d) {
				d.RPrev, d.RNext = nil, nil
				if d.rare != nil {
					d.rare.Children = nil
				}
				continue
			}
		} else {
			d.LPrev, d.LNext = c.Map(d.LPrev), c.Map(d.LNext)
		}
		if d.rare != nil {
			for k, ch := range d.rare.Children {
				d.rare.Children[k] = c.Map(ch)
			}
		}
		d.RPrev, d.RNext = c.Map(d.RPrev), c.Map(d.RNext)
	}
}

// arena carves full-capacity slices (an append moves them out) from
// chunks kept across uses.
type arena[T any] struct {
	chunks [][]T
	cur    int
}

func (a *arena[T]) reset() {
	for i := range a.chunks[:min(a.cur+1, len(a.chunks))] {
		a.chunks[i] = a.chunks[i][:0]
	}
	a.cur = 0
}

func (a *arena[T]) copy(x []T) []T {
	n := len(x)
	if n == 0 {
		return nil
	}
	for {
		if a.cur == len(a.chunks) {
			a.chunks = append(a.chunks, make([]T, 0, max(4096, n)))
		}
		ch := a.chunks[a.cur]
		if cap(ch)-len(ch) >= n {
			k := len(ch)
			ch = append(ch, x...)
			a.chunks[a.cur] = ch
			return ch[k : k+n : k+n]
		}
		a.cur++
	}
}

// slabs carves values from chunks kept across uses.
type slabs[T any] struct {
	chunks [][]T
	cur    int // chunks[cur][used:] is free
	used   int
}

func (s *slabs[T]) reset() { s.cur, s.used = 0, 0 }

func (s *slabs[T]) alloc() *T {
	for {
		if s.cur == len(s.chunks) {
			s.chunks = append(s.chunks, make([]T, slabStates))
		}
		if ch := s.chunks[s.cur]; s.used < len(ch) {
			s.used++
			return &ch[s.used-1]
		}
		s.cur, s.used = s.cur+1, 0
	}
}
