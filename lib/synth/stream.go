package synth

import (
	"errors"
	"io"

	"github.com/blis-sim/blis/lib/bug"
	"github.com/blis-sim/blis/lib/trace"
)

// Stream hands a spec's rows to a reader that pulls them in batches (the
// engine's Source): Generate runs on its own goroutine, at most a few
// batches ahead, so memory stays with the batches, not the workload.
type Stream struct {
	ch   chan []trace.Request
	errc chan error
	stop chan struct{}
	err  error
	done bool
}

// streamRows is a batch's rows.
const streamRows = 4096

var errStopped = errors.New("stopped")

// NewStream starts generating s. The caller reads it to the end or Closes it.
func NewStream(s *Spec) *Stream {
	st := &Stream{ch: make(chan []trace.Request, 2), errc: make(chan error, 1), stop: make(chan struct{})}
	go func() {
		defer bug.Catch()
		// Rows and their slices are reused by the generator after emit
		// returns; the reader keeps them, so each batch gets fresh storage.
		var batch []trace.Request
		var hashes []uint64
		var deps []string
		send := func() bool {
			if len(batch) == 0 {
				return true
			}
			select {
			case st.ch <- batch:
				batch, hashes, deps = nil, nil, nil
				return true
			case <-st.stop:
				return false
			}
		}
		_, err := Generate(s, func(r *trace.Request) error {
			if batch == nil {
				batch = make([]trace.Request, 0, streamRows)
			}
			c := *r
			if len(r.PrefixHashes) > 0 {
				n := len(hashes)
				hashes = append(hashes, r.PrefixHashes...)
				c.PrefixHashes = hashes[n:len(hashes):len(hashes)]
			}
			if len(r.DependsOn) > 0 {
				n := len(deps)
				deps = append(deps, r.DependsOn...)
				c.DependsOn = deps[n:len(deps):len(deps)]
			}
			batch = append(batch, c)
			if len(batch) == streamRows && !send() {
				return errStopped
			}
			return nil
		})
		if err == nil && !send() {
			err = errStopped
		}
		close(st.ch)
		st.errc <- err
	}()
	return st
}

// Next returns the next batch (buf is not used: batches are handed over),
// then io.EOF, or Generate's error (a bad-input one for a spec whose
// samples break a limit: LimitError), at every call after the last batch.
func (s *Stream) Next(buf []trace.Request) ([]trace.Request, error) {
	if s.done {
		return buf[:0], s.final()
	}
	b, ok := <-s.ch
	if !ok {
		s.done = true
		s.err = <-s.errc
		return buf[:0], s.final()
	}
	return b, nil
}

func (s *Stream) final() error {
	if s.err != nil {
		return s.err
	}
	return io.EOF
}

// Close stops the generator if the reader ended early.
func (s *Stream) Close() {
	if s.done {
		return
	}
	close(s.stop)
	for range s.ch {
	}
	<-s.errc
	s.done = true
}
