package trace

import (
	"sync"
	"sync/atomic"
)

// RowWriter is a typed table writer: ResultWriter, StepWriter.
type RowWriter[T any] interface {
	Write(*T) error
	Close() error
	Abort()
}

// Pipe is a RowWriter that hands its rows to another on a goroutine of its
// own, in chunks of pipeChunk rows: the caller (the simulator's event loop)
// only copies each row, while the builders' appends, the IPC encoding and
// the writes happen beside it. The rows reach the inner writer in the
// order written, so its output is byte for byte what it would have been.
//
// Rows are copied by value: strings and slices in them must not change
// after Write (the engine's rows never do). Memory is bounded: at most
// pipeDepth chunks wait, and Write blocks while the writer catches up.
//
// The inner writer's first error is returned by the Write that hands over
// the next chunk, or by Close; after it the rows are discarded. Close or
// Abort must be called (each ends the goroutine).
type Pipe[T any] struct {
	w     RowWriter[T]
	chunk []T
	full  chan []T
	free  chan []T
	made  int // chunks made (at most pipeDepth+1)
	done  chan struct{}
	err   atomic.Pointer[error]
	once  sync.Once
	ended bool // the inner writer closed or aborted
}

const (
	pipeChunk = 1024
	// pipeDepth chunks may wait for the writer: enough to ride out the
	// encoding and write of a batch (BatchRows rows, 32 chunks), during
	// which the event loop blocked on 4 chunks: 16 of Results are 9.6 MB
	// at most, made only while the writer is behind (bench/sim.sh's peak
	// RSS did not grow).
	pipeDepth = 16
)

// NewPipe starts a goroutine writing to w.
func NewPipe[T any](w RowWriter[T]) *Pipe[T] {
	p := &Pipe[T]{w: w, full: make(chan []T, pipeDepth), free: make(chan []T, pipeDepth+1), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *Pipe[T]) run() {
	defer close(p.done)
	for c := range p.full {
		if p.err.Load() == nil {
			for i := range c {
				if err := p.w.Write(&c[i]); err != nil {
					p.err.Store(&err)
					break
				}
			}
		}
		p.free <- c[:0]
	}
}

// Write copies r into the current chunk, handing it over when full.
func (p *Pipe[T]) Write(r *T) error {
	p.chunk = append(p.chunk, *r)
	if len(p.chunk) >= pipeChunk {
		return p.send()
	}
	return nil
}

func (p *Pipe[T]) send() error {
	if e := p.err.Load(); e != nil {
		p.chunk = p.chunk[:0]
		return *e
	}
	p.full <- p.chunk
	// A table of a few rows never makes a second chunk; the first grows
	// by append, so a tiny table pays for its rows only.
	select {
	case p.chunk = <-p.free:
	default:
		if p.made < pipeDepth {
			p.made++
			p.chunk = make([]T, 0, pipeChunk)
		} else {
			p.chunk = <-p.free
		}
	}
	return nil
}

// stop hands over the rows held (unless aborting) and waits for the
// goroutine to finish.
func (p *Pipe[T]) stop(flush bool) {
	p.once.Do(func() {
		if flush && len(p.chunk) > 0 && p.err.Load() == nil {
			p.full <- p.chunk
		}
		p.chunk = nil
		close(p.full)
		<-p.done
	})
}

// Close writes the rows held and closes the inner writer; the inner
// writer's first error is returned (its output then aborted).
func (p *Pipe[T]) Close() error {
	p.stop(true)
	if p.ended {
		return nil
	}
	p.ended = true
	if e := p.err.Load(); e != nil {
		p.w.Abort()
		return *e
	}
	return p.w.Close()
}

// Abort drops the rows held and aborts the inner writer, unless Close
// already ended it.
func (p *Pipe[T]) Abort() {
	p.stop(false)
	if !p.ended {
		p.ended = true
		p.w.Abort()
	}
}
