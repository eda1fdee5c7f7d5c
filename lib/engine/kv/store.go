// Package kv is a replica's KV cache: paged blocks with prefix caching, after
// vLLM v1's block pool. The scheduler holds a Store; a request's blocks on a
// replica are a Handle it owns. Caching and eviction of prefix keys are
// reported to an Observer (the router's global prefix index, later the lower
// tiers of a tiered cache), so nothing polls a store to learn what it holds.
package kv

// Handle is the KV one request holds on one replica: its identified blocks
// (prompt blocks that carry, or will carry, a prefix-cache key) in order,
// followed by Anon anonymous blocks; under vLLM's hybrid KV cache manager
// those are its full-attention group's, and Slide anonymous blocks are its
// sliding-window groups' (the blocks covering its window).
//
// Unique marks a request whose first prefix key no other request of the run
// has (the input promises it: blis.prefix_unique). None of its blocks can
// then be hit by another request, so a store set private that nobody
// observes keeps no record for its keyed blocks after the first: IDs holds
// placeholders for them (see Paged). Expose ends that before the request
// looks its own keys up again.
type Handle struct {
	IDs    []int32
	Anon   int32
	Slide  int32
	Unique bool
}

// Blocks is the number of blocks the handle holds in its full-attention
// group (every block when there are no sliding-window groups).
func (h *Handle) Blocks() int32 { return int32(len(h.IDs)) + h.Anon }

// Observer hears about prefix keys becoming findable in a store or leaving
// it. Calls happen inside Store methods; an observer must not call back.
type Observer interface {
	Cached(key uint64)
	Evicted(key uint64)
}

// Store is one replica's KV cache. Block counts are int32: a replica holds
// fewer than 2^31 blocks (the config bounds it).
type Store interface {
	BlockSize() int32
	Total() int32
	Free() int32 // blocks in the free queue (unreferenced, possibly still cached)
	Used() int32 // Total − Free
	Evictions() int64

	// Lookup returns how many leading keys are cached, at most max.
	Lookup(keys []uint64, max int) int
	// Has reports whether keys[i] exists and is cached.
	Has(keys []uint64, i int) bool
	// HitCost is how many free-queue blocks taking the first n cached
	// blocks of keys would remove from the free queue.
	HitCost(keys []uint64, n int) int32

	// Alloc gives h n more blocks from the head of the free queue, of which
	// the first k get identities; the caller has checked Free() >= n.
	Alloc(h *Handle, n, k int32)
	// Release drops every block of h: its sliding-window blocks, then the
	// rest last block first.
	Release(h *Handle)
	// Slide gives h n more sliding-window blocks (n > 0, from the head of
	// the free queue as Alloc(h, n, 0); the caller has checked Free()) or
	// frees −n of them to the tail (n < 0: they left the window).
	Slide(h *Handle, n int32)
	// Touch gives h a reference to the first n cached blocks of keys.
	Touch(h *Handle, keys []uint64, n int)
	// Register makes h's blocks [from, to) findable under keys[from:to].
	Register(h *Handle, keys []uint64, from, to int)
	// Expose makes a Unique handle's blocks what they are for any other
	// handle (records, links, index entries), and the handle no longer
	// Unique: its request is about to release them and then look its own
	// keys up (a preemption). Other handles are left alone.
	Expose(h *Handle, keys []uint64)
	// Clash reports a key that a Unique handle's request and another
	// request both have at their first block (the input's promise broken),
	// and whether there was one.
	Clash() (uint64, bool)
	// Warm says a request with these keys is about to be looked up,
	// given a block per key and, when its prefill step ends, registered:
	// the store may start bringing what that touches into the
	// processor's cache. A hint; it changes nothing.
	Warm(keys []uint64)

	// CleanFree is how many blocks Alloc can hand out from the head of
	// the free queue before it would evict a cached block; Observed
	// reports whether anyone (an observer, lower tiers) hears this store's
	// cache and evict events. A run of steps leaped at once (the engine's
	// leaping) evicts nothing that is heard.
	CleanFree() int32
	Observed() bool
	// AnonHead is how many anonymous blocks the head of the free queue
	// holds in one run; TakeAnon(n), n at most that, takes n of them as n
	// calls Alloc(h, 1, 0) would, the caller adding them to the handles
	// (Handle.Anon): a span's block-boundary blocks in one call.
	AnonHead() int32
	TakeAnon(n int32)

	// SetObserver installs o (nil removes it).
	SetObserver(o Observer)
	// SetLower installs the lower tiers' observer (nil: none): it hears
	// the same events as the observer, for offloading.
	SetLower(o Observer)
	// QuickCheck is an O(1) conservation check; Check walks everything.
	QuickCheck() error
	Check() error
	// Clone returns an independent copy with no observer. Handles held by
	// requests are copied by their owners; block ids stay valid.
	Clone() Store
}
