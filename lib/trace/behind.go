package trace

import "sync/atomic"

// TableWriter is a table writer: rows in, then Close (the table complete)
// or Abort (discarded). *ResultWriter and *StepWriter are ones.
type TableWriter[T any] interface {
	Write(*T) error
	Close() error
	Abort()
}

// Behind runs a table writer on a goroutine of its own, a few chunks
// behind its caller: the simulation copies each row into a chunk and goes
// on, and encoding the rows (a fifth of a simulation's time, a quarter more
// with decision rows) and writing them out happen on a processor to spare.
// The writer sees the same rows in the same order, so the table is
// byte-identical.
//
// A write error is returned by a later Write (at the next chunk) or by
// Close; rows after it are dropped, as a failed run's table is discarded.
// Close or Abort must be called: they stop the goroutine.
type Behind[T any] struct {
	w      TableWriter[T]
	keep   func(*T, *arena) // copies what the caller reuses (nil: nothing)
	cur    *chunk[T]
	full   chan *chunk[T]
	free   chan *chunk[T]
	done   chan struct{}
	err    atomic.Pointer[error]
	stop   atomic.Bool
	closed bool
}

// chunk is rows on their way to the writer, with the arena holding the
// copies of their slices.
type chunk[T any] struct {
	rows []T
	a    arena
}

// arena holds copies of the slices a row's producer reuses: a decision
// row's candidates and filtered replicas (the recorder resets them for its
// next row).
type arena struct {
	cands []Candidate
	filt  []Filtered
}

const (
	behindRows  = 256 // rows per chunk
	behindDepth = 4   // chunks that may wait for the writer
)

// NewBehind starts writing to w behind its caller. A row's strings must
// not change later; the slices a producer reuses are copied with the row
// (a decision row's candidate and filtered lists, which the recorder
// resets for its next row). The engine's results and steps reuse none.
func NewBehind[T any](w TableWriter[T]) *Behind[T] {
	keep, _ := any(keepDecision).(func(*T, *arena)) // nil unless T is Decision
	b := &Behind[T]{w: w, keep: keep, cur: newChunk[T](), full: make(chan *chunk[T], behindDepth),
		free: make(chan *chunk[T], behindDepth+2), done: make(chan struct{})}
	go b.run()
	return b
}

func keepDecision(d *Decision, a *arena) {
	if n := len(d.Candidates); n > 0 {
		i := len(a.cands)
		a.cands = append(a.cands, d.Candidates...)
		d.Candidates = a.cands[i : i+n : i+n]
	}
	if n := len(d.Filtered); n > 0 {
		i := len(a.filt)
		a.filt = append(a.filt, d.Filtered...)
		d.Filtered = a.filt[i : i+n : i+n]
	}
}

func newChunk[T any]() *chunk[T] { return &chunk[T]{rows: make([]T, 0, behindRows)} }

func (b *Behind[T]) run() {
	defer close(b.done)
	for c := range b.full {
		if !b.stop.Load() && b.err.Load() == nil {
			for i := range c.rows {
				if err := b.w.Write(&c.rows[i]); err != nil {
					e := err // (storing &err itself would put every row's err on the heap)
					b.err.Store(&e)
					break
				}
			}
		}
		// The rows' strings and slices are free to go.
		clear(c.rows)
		clear(c.a.cands)
		clear(c.a.filt)
		c.rows, c.a.cands, c.a.filt = c.rows[:0], c.a.cands[:0], c.a.filt[:0]
		select {
		case b.free <- c:
		default:
		}
	}
}

// Write copies r: the caller may reuse it.
func (b *Behind[T]) Write(r *T) error {
	c := b.cur
	c.rows = append(c.rows, *r)
	if b.keep != nil {
		b.keep(&c.rows[len(c.rows)-1], &c.a)
	}
	if len(c.rows) < cap(c.rows) {
		return nil
	}
	if e := b.err.Load(); e != nil {
		c.rows, c.a.cands, c.a.filt = c.rows[:0], c.a.cands[:0], c.a.filt[:0]
		return *e
	}
	b.full <- c
	select {
	case b.cur = <-b.free:
	default:
		// At most behindDepth chunks wait and one is being written.
		b.cur = newChunk[T]()
	}
	return nil
}

// finish hands over the last rows and waits for the goroutine.
func (b *Behind[T]) finish() {
	if b.closed {
		return
	}
	b.closed = true
	if len(b.cur.rows) > 0 && !b.stop.Load() {
		b.full <- b.cur
	}
	b.cur = nil
	close(b.full)
	<-b.done
}

// Close writes the rows still held and closes the writer, or returns the
// write error the goroutine met (the writer is then left for Abort).
func (b *Behind[T]) Close() error {
	b.finish()
	if e := b.err.Load(); e != nil {
		return *e
	}
	return b.w.Close()
}

// Abort drops the rows still held and aborts the writer.
func (b *Behind[T]) Abort() {
	b.stop.Store(true)
	b.finish()
	b.w.Abort()
}
