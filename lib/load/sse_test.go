package load

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct{ typ, data string }

func readAllEvents(r io.Reader, max int) ([]ev, error) {
	s := NewSSE(r, max)
	var out []ev
	for {
		e, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev{e.Type, string(e.Data)})
	}
}

// referenceSSE is the standard's algorithm written plainly over the whole
// input, for the fuzz target to compare against.
func referenceSSE(in []byte) []ev {
	in = bytes.TrimPrefix(in, bom)
	var lines []string
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			break // an unterminated last line is never dispatched
		}
		lines = append(lines, string(in[:i]))
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	var out []ev
	var data, typ strings.Builder
	has := false
	for _, l := range lines {
		if l == "" {
			if has {
				out = append(out, ev{typ.String(), strings.TrimSuffix(data.String(), "\n")})
			}
			data.Reset()
			typ.Reset()
			has = false
			continue
		}
		if l[0] == ':' {
			continue
		}
		f, v, _ := strings.Cut(l, ":")
		v = strings.TrimPrefix(v, " ")
		switch f {
		case "data":
			data.WriteString(v + "\n")
			has = true
		case "event":
			typ.Reset()
			typ.WriteString(v)
		}
	}
	return out
}

func TestSSE(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []ev
		err      error
	}{
		{"openai", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []ev{{"", `{"a":1}`}, {"", "[DONE]"}}, nil},
		{"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", []ev{{"", "x"}, {"", "y"}}, nil},
		{"lone cr", "data: x\r\rdata: y\r\r", []ev{{"", "x"}, {"", "y"}}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []ev{{"", "a\nb"}}, nil},
		{"no space", "data:x\n\n", []ev{{"", "x"}}, nil},
		{"two spaces keep one", "data:  x\n\n", []ev{{"", " x"}}, nil},
		{"comments and keep-alives", ": ping\n\n: ping\ndata: x\n\n", []ev{{"", "x"}}, nil},
		{"event type", "event: error\ndata: {\"error\":1}\n\n", []ev{{"error", `{"error":1}`}}, nil},
		{"type without data is not dispatched", "event: x\n\ndata: y\n\n", []ev{{"", "y"}}, nil},
		{"empty data is an event", "data\n\n", []ev{{"", ""}}, nil},
		{"id and retry ignored", "id: 7\nretry: 10\ndata: x\n\n", []ev{{"", "x"}}, nil},
		{"bom", "\xef\xbb\xbfdata: x\n\n", []ev{{"", "x"}}, nil},
		{"unterminated last event dropped", "data: x\n\ndata: cut", []ev{{"", "x"}}, nil},
		{"event without blank line dropped", "data: x\n\ndata: y\n", []ev{{"", "x"}}, nil},
		{"too large", "data: " + strings.Repeat("x", 100) + "\n\n", nil, ErrEventTooLarge},
		{"too large over lines", strings.Repeat("data: xxxxxxxxxx\n", 10) + "\n", nil, ErrEventTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunked := range []bool{false, true} {
				var r io.Reader = strings.NewReader(tc.in)
				if chunked {
					r = iotest.OneByteReader(r)
				}
				got, err := readAllEvents(r, 64)
				if !errors.Is(err, tc.err) {
					t.Fatalf("chunked=%v: error %v, want %v", chunked, err, tc.err)
				}
				if tc.err == nil && !equalEvents(got, tc.want) {
					t.Fatalf("chunked=%v: got %q, want %q", chunked, got, tc.want)
				}
			}
		})
	}
}

func TestSSEReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: x\n\ndata: y"), iotest.ErrReader(boom))
	got, err := readAllEvents(r, 1<<10)
	if !errors.Is(err, boom) || len(got) != 1 {
		t.Fatalf("got %q, %v; want one event then the read error", got, err)
	}
}

func equalEvents(a, b []ev) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzSSE: the parser agrees with the reference algorithm however the
// bytes are split across reads, and never panics.
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n",
		"data: x\r\n\r\n", "data: x\r\r", ": c\nevent: e\ndata: 1\ndata: 2\n\n",
		"\xef\xbb\xbfdata: x\n\n", "data:\n\n", "\xef\xbb", "\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint8) {
		want := referenceSSE(in)
		r := io.Reader(bytes.NewReader(in))
		if split > 0 {
			r = &splitReader{b: in, n: int(split)}
		}
		got, err := readAllEvents(r, 1<<20)
		if err != nil {
			t.Fatalf("error %v on %q", err, in)
		}
		if !equalEvents(got, want) {
			t.Fatalf("input %q split %d: got %q, want %q", in, split, got, want)
		}
	})
}

// splitReader returns at most n bytes per read.
type splitReader struct {
	b []byte
	n int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), s.n, len(s.b))
	copy(p, s.b[:k])
	s.b = s.b[k:]
	return k, nil
}
