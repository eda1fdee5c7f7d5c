package trace

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is an Arrow allocator that keeps the buffers Arrow frees (when
// the last reference to a written batch is released) and hands them out
// again, cleared, for the next batch. A table written in batches of
// BatchRows rows then reuses one batch's memory instead of asking the Go
// heap for fresh pages every batch: the first touch of fresh pages and the
// garbage collector's work on the old ones were a fifth of blis-sim's time.
//
// Arrow's reference counts decide when a buffer is free, so a sink that
// keeps a batch (Retain) keeps its buffers out of the pool. Buffers given
// up by growing (Reallocate) are left to the garbage collector: their
// sizes do not come back once a batch has its full size.
type recycler struct {
	mu    sync.Mutex
	free  [][]byte
	bytes int // held in free
}

// maxRecycled bounds the memory a recycler holds between batches: more
// than a full results batch of every column.
const maxRecycled = 64 << 20

func newRecycler() *recycler { return &recycler{} }

func (p *recycler) Allocate(size int) []byte {
	b, reused := p.take(size, size)
	if reused {
		clear(b[:cap(b)]) // what Arrow's own allocator hands out: zeroed memory
	}
	return b
}

// take is Allocate without clearing a reused buffer (a new one is zeroed),
// for a buffer about to be overwritten; a new buffer gets room for room
// bytes (>= size), so that slightly larger sizes to come can reuse it.
func (p *recycler) take(size, room int) (b []byte, reused bool) {
	p.mu.Lock()
	best := -1
	for i, b := range p.free {
		// Best fit, and never more than twice the size asked for.
		if c := cap(b); c >= size && c <= 2*size+64 && (best < 0 || c < cap(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b = p.free[best]
		last := len(p.free) - 1
		p.free[best] = p.free[last]
		p.free[last] = nil
		p.free = p.free[:last]
		p.bytes -= cap(b)
		p.mu.Unlock()
		return b[:size], true
	}
	p.mu.Unlock()
	return goAlloc.Allocate(max(size, room))[:size], false
}

// goAlloc hands out new buffers: Go's, zeroed (arrow's DefaultAllocator
// is C's malloc under the mallocator build tag).
var goAlloc = memory.NewGoAllocator()

func (p *recycler) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	return nb
}

func (p *recycler) Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	if p.bytes+cap(b) <= maxRecycled {
		p.free = append(p.free, b[:0])
		p.bytes += cap(b)
	}
	p.mu.Unlock()
}

// drop lets the garbage collector have what the recycler holds.
func (p *recycler) drop() {
	p.mu.Lock()
	p.free, p.bytes = nil, 0
	p.mu.Unlock()
}

var _ memory.Allocator = (*recycler)(nil)
