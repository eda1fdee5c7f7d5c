package trace

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// notArrowError is input that is clearly something else than an Arrow
// stream: what says what it looks like ("CSV text (first line: …)").
type notArrowError struct{ what string }

func (e *notArrowError) Error() string { return e.what + ", not an Arrow table" }

// sniffLen is how much of an input sniff looks at.
const sniffLen = 512

// sniff describes head, the first bytes of an input that is not an Arrow
// stream, or returns "" when it may be one (or nothing better can be said).
func sniff(head []byte) string {
	switch {
	case len(head) >= 4 && bytes.Equal(head[:4], []byte{0xff, 0xff, 0xff, 0xff}):
		return "" // the stream's continuation marker
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return "gzip-compressed data"
	case len(head) >= 4 && string(head[:4]) == "PAR1":
		return "a Parquet file"
	case len(head) >= 6 && string(head[:6]) == "ARROW1":
		return "an Arrow IPC file"
	}
	text := bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")) // a UTF-8 byte-order mark
	if len(text) == 0 || !isText(text) {
		return ""
	}
	line, _, _ := bytes.Cut(bytes.TrimLeft(text, " \t\r\n"), []byte("\n"))
	first := strings.TrimSpace(string(line))
	if len(first) > 80 {
		first = first[:77] + "..."
	}
	kind := "text"
	switch t := bytes.TrimLeft(text, " \t\r\n"); {
	case len(t) > 0 && (t[0] == '{' || t[0] == '['):
		kind = "JSON"
		if bytes.Count(text, []byte("\n{")) > 0 {
			kind = "JSON lines"
		}
	case sameCount(text, ','):
		kind = "CSV"
	case sameCount(text, '\t'):
		kind = "TSV"
	}
	return fmt.Sprintf("%s (first line: %q)", kind, first)
}

// sameCount reports whether the first two lines of text both hold sep, as
// often (a header and a row of a table).
func sameCount(text []byte, sep byte) bool {
	lines := bytes.SplitN(text, []byte("\n"), 3)
	if len(lines) < 2 {
		return bytes.IndexByte(lines[0], sep) >= 0
	}
	n := bytes.Count(lines[0], []byte{sep})
	return n > 0 && n == bytes.Count(lines[1], []byte{sep})
}

// isText reports whether b (a prefix, maybe cut inside a rune) is
// printable UTF-8 text.
func isText(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return len(b) < utf8.UTFMax // a rune cut at the end
		}
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
		b = b[n:]
	}
	return true
}

// notArrow words a notArrowError for the input name (as the user gave it).
func notArrow(name, path string, err error) error {
	var na *notArrowError
	if !errors.As(err, &na) {
		return nil
	}
	if na.what == "a Parquet file" {
		return fmt.Errorf("%s: this is a Parquet file, which this tool does not read: convert it first with blis-convert --format arrow %s -o out.arrow", name, path)
	}
	if path == "" || path == "-" {
		return fmt.Errorf("stdin holds %s: convert it first with blis-convert (blis-convert FILE | …; it reads CSV, JSON lines and known trace formats, see docs/convert.md)", na.Error())
	}
	return fmt.Errorf("%s: this is %s: convert it first with blis-convert (blis-convert %s | …; it reads CSV, JSON lines and known trace formats, see docs/convert.md)", name, na.Error(), path)
}
