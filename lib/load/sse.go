package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// SSE is a reader of a text/event-stream body (the WHATWG "server-sent
// events" format that OpenAI-compatible servers stream completions in).
// Lines end with LF, CRLF or a lone CR; a blank line dispatches the event;
// lines starting with ':' are comments; "data" lines are joined with LF;
// a byte-order mark at the very start is skipped; an event cut by the end
// of the stream (no blank line after it) is discarded, as the standard says.
type SSE struct {
	r     io.Reader
	buf   []byte
	start int
	end   int
	eof   bool
	rerr  error
	// skipLF: the last line ended with CR, so an LF that follows belongs
	// to it (CRLF split across reads).
	skipLF  bool
	started bool
	max     int

	data    []byte
	hasData bool
	event   []byte
}

// Event is one dispatched event. Data is valid until the next call to Next.
type Event struct {
	Type string // the "event" field; "" means "message"
	Data []byte
}

// ErrEventTooLarge is returned for a line or event longer than the reader's
// limit: a server streaming megabytes without a line break is not an SSE
// stream we should buffer without bound.
var ErrEventTooLarge = errors.New("server-sent event larger than the limit")

// NewSSE reads events from r; a line or event above maxBytes is an error.
func NewSSE(r io.Reader, maxBytes int) *SSE {
	return &SSE{r: r, buf: make([]byte, 0, 4096), max: maxBytes}
}

// Next returns the next event, io.EOF at a clean end of the stream (an
// unterminated last event is dropped), or the underlying read error.
func (s *SSE) Next() (Event, error) {
	for {
		line, err := s.line()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			if !s.hasData {
				s.event = s.event[:0]
				continue
			}
			d := s.data
			if n := len(d); n > 0 && d[n-1] == '\n' {
				d = d[:n-1]
			}
			ev := Event{Type: string(s.event), Data: d}
			s.data, s.hasData, s.event = s.data[:0], false, s.event[:0]
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if len(s.data)+len(value)+1 > s.max {
				return Event{}, fmt.Errorf("%w (%d bytes)", ErrEventTooLarge, s.max)
			}
			s.data = append(append(s.data, value...), '\n')
			s.hasData = true
		case "event":
			s.event = append(s.event[:0], value...)
		}
		// "id" and "retry" (reconnection) do not apply to a completion.
	}
}

// line returns the next line without its terminator, valid until the next
// call.
func (s *SSE) line() ([]byte, error) {
	for {
		if s.skipLF && s.start < s.end {
			if s.buf[s.start] == '\n' {
				s.start++
			}
			s.skipLF = false
		}
		rest := s.buf[s.start:s.end]
		if !s.started {
			// Skip a byte-order mark; wait while the bytes so far could
			// still be one.
			if len(rest) < len(bom) && !s.eof && bytes.HasPrefix(bom, rest) {
				s.fill()
				continue
			}
			s.started = true
			if bytes.HasPrefix(rest, bom) {
				s.start += len(bom)
				rest = rest[len(bom):]
			}
		}
		if i := bytes.IndexAny(rest, "\r\n"); i >= 0 {
			s.start += i + 1
			s.skipLF = rest[i] == '\r'
			return rest[:i], nil
		}
		if s.eof {
			if s.rerr != nil {
				return nil, s.rerr
			}
			return nil, io.EOF
		}
		if len(rest) > s.max {
			return nil, fmt.Errorf("%w (%d bytes)", ErrEventTooLarge, s.max)
		}
		s.fill()
	}
}

var bom = []byte("\xef\xbb\xbf")

// fill reads more bytes, compacting the buffer first.
func (s *SSE) fill() {
	if s.start > 0 {
		n := copy(s.buf[:cap(s.buf)], s.buf[s.start:s.end])
		s.start, s.end = 0, n
	}
	if s.end == cap(s.buf) {
		nb := make([]byte, s.end, 2*cap(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	s.buf = s.buf[:cap(s.buf)]
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	s.buf = s.buf[:s.end]
	if err != nil {
		s.eof = true
		if err != io.EOF {
			s.rerr = err
		}
	}
}
