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
// on, and encoding the rows (a fifth of a simulation's time) and writing
// them out happen on a processor to spare. The writer sees the same rows in
// the same order, so the table is byte-identical.
//
// A write error is returned by a later Write (at the next chunk) or by
// Close; rows after it are dropped, as a failed run's table is discarded.
// Close or Abort must be called: they stop the goroutine.
type Behind[T any] struct {
	w      TableWriter[T]
	cur    []T
	full   chan []T
	free   chan []T
	done   chan struct{}
	err    atomic.Pointer[error]
	stop   atomic.Bool
	closed bool
}

const (
	behindRows  = 256 // rows per chunk
	behindDepth = 4   // chunks that may wait for the writer
)

// NewBehind starts writing to w behind its caller.
func NewBehind[T any](w TableWriter[T]) *Behind[T] {
	b := &Behind[T]{w: w, cur: make([]T, 0, behindRows), full: make(chan []T, behindDepth),
		free: make(chan []T, behindDepth+2), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *Behind[T]) run() {
	defer close(b.done)
	var zero T
	for rows := range b.full {
		if !b.stop.Load() && b.err.Load() == nil {
			for i := range rows {
				if err := b.w.Write(&rows[i]); err != nil {
					b.err.Store(&err)
					break
				}
			}
		}
		for i := range rows {
			rows[i] = zero // the rows' strings and slices are free to go
		}
		select {
		case b.free <- rows[:0]:
		default:
		}
	}
}

// Write copies r: the caller may reuse it, and its strings and slices
// must stay unchanged (the engine's results are so).
func (b *Behind[T]) Write(r *T) error {
	b.cur = append(b.cur, *r)
	if len(b.cur) < cap(b.cur) {
		return nil
	}
	if e := b.err.Load(); e != nil {
		b.cur = b.cur[:0]
		return *e
	}
	b.full <- b.cur
	select {
	case b.cur = <-b.free:
	default:
		// At most behindDepth chunks wait and one is being written.
		b.cur = make([]T, 0, behindRows)
	}
	return nil
}

// finish hands over the last rows and waits for the goroutine.
func (b *Behind[T]) finish() {
	if b.closed {
		return
	}
	b.closed = true
	if len(b.cur) > 0 && !b.stop.Load() {
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
