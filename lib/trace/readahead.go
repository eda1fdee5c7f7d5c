package trace

import (
	"io"
	"sync"
)

// ReadAhead decodes a requests table on a goroutine of its own, a few
// chunks (of up to decodeRows rows) ahead of its reader: the simulator's
// event loop then finds its next rows decoded. Next returns what the
// RequestReader's Next would, in the same order, errors included.
//
// A chunk Next returned is handed back to the decoder by the next call
// (the engine's feeder passes it back, as RequestReader's contract has
// it), so memory stays at readDepth+2 chunks. Close must be called: it
// stops the goroutine, after which the table may be closed.
type ReadAhead struct {
	full chan readChunk
	free chan []Request
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type readChunk struct {
	rows []Request
	err  error
}

// readDepth chunks may wait decoded.
const readDepth = 2

// NewReadAhead starts decoding rr.
func NewReadAhead(rr *RequestReader) *ReadAhead {
	a := &ReadAhead{full: make(chan readChunk, readDepth), free: make(chan []Request, readDepth+2),
		stop: make(chan struct{}), done: make(chan struct{})}
	go a.run(rr)
	return a
}

func (a *ReadAhead) run(rr *RequestReader) {
	defer close(a.done)
	defer close(a.full)
	var buf []Request
	for {
		rows, err := rr.Next(buf)
		select {
		case a.full <- readChunk{rows, err}:
		case <-a.stop:
			return
		}
		if err != nil {
			return // io.EOF, or a bad row: the table ends there
		}
		// A chunk handed back, else a new one: at most readDepth wait,
		// one is the reader's and one is being decoded.
		select {
		case buf = <-a.free:
		default:
			buf = nil
		}
	}
}

// Next returns the next rows, or io.EOF after the last; buf, when it is
// a chunk an earlier call returned, goes back to the decoder.
func (a *ReadAhead) Next(buf []Request) ([]Request, error) {
	if cap(buf) > 0 {
		select {
		case a.free <- buf[:0]:
		default:
		}
	}
	c, ok := <-a.full
	if !ok {
		return nil, io.EOF
	}
	return c.rows, c.err
}

// RowsValidated says every row Next returns has passed Request.Validate.
func (a *ReadAhead) RowsValidated() bool { return true }

// Close stops the decoder and waits for it.
func (a *ReadAhead) Close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}
