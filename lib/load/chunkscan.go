package load

// scanChunk reads the common shape of a streamed completion chunk without
// reflection or allocation: one pass over the bytes, checking JSON syntax
// as encoding/json does. Anything outside that shape (a usage or error
// object, escaped or non-ASCII keys, a repeated field, a value of an
// unexpected type, invalid JSON) returns ok = false and the caller decodes
// with encoding/json instead, so both ways always agree (FuzzScanChunk
// checks it). A chunk costs about a tenth of decodeChunk's reflection.
func scanChunk(b []byte) (d decoded, ok bool) {
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return d, false
	}
	var seen [5]bool // choices, usage, error, object, message
	s.ws()
	if s.eat('}') {
		return d, s.end()
	}
	for {
		s.ws()
		k, ok := s.key()
		if !ok {
			return d, false
		}
		s.ws()
		if !s.eat(':') {
			return d, false
		}
		s.ws()
		f := -1
		switch {
		case fold(k, "choices"):
			f = 0
		case fold(k, "usage"):
			f = 1
		case fold(k, "error"):
			f = 2
		case fold(k, "object"):
			f = 3
		case fold(k, "message"):
			f = 4
		}
		if f >= 0 {
			if seen[f] {
				return d, false
			}
			seen[f] = true
		}
		switch f {
		case 0:
			if !s.choices(&d) {
				return d, false
			}
			d.completion = true
		case 1, 2: // usage and errors are rare: encoding/json reads them
			if !s.null() {
				return d, false
			}
		case 3:
			v, ok := s.str()
			switch {
			case ok && string(v) == "error":
				return d, false
			case ok:
				for _, c := range v {
					if c == '\\' {
						return d, false
					}
				}
			case !s.null():
				return d, false
			}
		case 4:
			if _, ok := s.str(); !ok && !s.null() {
				return d, false
			}
		default:
			if !s.value(0) {
				return d, false
			}
		}
		s.ws()
		if s.eat('}') {
			return d, s.end()
		}
		if !s.eat(',') {
			return d, false
		}
	}
}

// choices reads the choices array.
func (s *scanner) choices(d *decoded) bool {
	if !s.eat('[') {
		return false
	}
	s.ws()
	if s.eat(']') {
		return true
	}
	for {
		s.ws()
		if !s.choice(d) {
			return false
		}
		s.ws()
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// choice reads one element of choices: text, delta, finish_reason.
func (s *scanner) choice(d *decoded) bool {
	if !s.eat('{') {
		return false
	}
	var seen [3]bool
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		k, ok := s.key()
		if !ok {
			return false
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		switch {
		case fold(k, "text"):
			if seen[0] || !s.text(d) {
				return false
			}
			seen[0] = true
		case fold(k, "delta"):
			if seen[1] || !s.delta(d) {
				return false
			}
			seen[1] = true
		case fold(k, "finish_reason"):
			if seen[2] {
				return false
			}
			seen[2] = true
			if v, ok := s.str(); ok {
				if len(v) > 0 {
					d.finished = true
				}
			} else if !s.null() {
				return false
			}
		default:
			if !s.value(0) {
				return false
			}
		}
		s.ws()
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// text reads a string or null; a non-empty string is generated text.
func (s *scanner) text(d *decoded) bool {
	if v, ok := s.str(); ok {
		if len(v) > 0 {
			d.tokens = true
		}
		return true
	}
	return s.null()
}

func (s *scanner) delta(d *decoded) bool {
	if s.null() {
		return true
	}
	if !s.eat('{') {
		return false
	}
	var seen [3]bool
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		k, ok := s.key()
		if !ok {
			return false
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		f := -1
		switch {
		case fold(k, "content"):
			f = 0
		case fold(k, "reasoning_content"):
			f = 1
		case fold(k, "reasoning"):
			f = 2
		}
		if f >= 0 {
			if seen[f] || !s.text(d) {
				return false
			}
			seen[f] = true
		} else if !s.value(0) {
			return false
		}
		s.ws()
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end: nothing but whitespace after the top-level value.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

func (s *scanner) lit(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

func (s *scanner) null() bool { return s.lit("null") }

// key reads an object key; only plain ASCII keys without escapes take the
// fast path (encoding/json unescapes and folds the others).
func (s *scanner) key() ([]byte, bool) {
	v, ok := s.str()
	if !ok {
		return nil, false
	}
	for _, c := range v {
		if c == '\\' || c >= 0x80 {
			return nil, false
		}
	}
	return v, true
}

// str reads a string and returns its raw contents (between the quotes),
// checking escapes and control characters as JSON requires.
func (s *scanner) str() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return nil, false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return nil, false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return nil, false
					}
				}
				s.i += 5
			default:
				return nil, false
			}
		default:
			s.i++
		}
	}
	return nil, false
}

// value skips any JSON value, checking its syntax.
func (s *scanner) value(depth int) bool {
	if depth > 1000 {
		return false // encoding/json has its own limit: let it judge
	}
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return true
		}
		for {
			s.ws()
			if _, ok := s.str(); !ok {
				return false
			}
			s.ws()
			if !s.eat(':') {
				return false
			}
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat('}') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return true
		}
		for {
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(']') {
				return true
			}
			if !s.eat(',') {
				return false
			}
		}
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.null()
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return false
}

// number checks JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.eat('-')
	digits := func() int {
		n := 0
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		digits()
	default:
		return false
	}
	if s.eat('.') && digits() == 0 {
		return false
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if !s.eat('+') {
			s.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// fold compares an ASCII key with a lower-case name, ignoring case, as
// encoding/json matches field names.
func fold(k []byte, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := range k {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}
