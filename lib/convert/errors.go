package convert

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// BadRowError describes one malformed source row as
// "file:line: column: expected …, found …".
type BadRowError struct {
	Path     string
	Line     int64
	Column   string
	Expected string
	Found    string
}

func (e *BadRowError) Error() string {
	if e.Line == 0 { // JSON documents: the column is a path inside the document
		return fmt.Sprintf("%s: %s: expected %s, found %s", e.Path, e.Column, e.Expected, e.Found)
	}
	return fmt.Sprintf("%s:%d: %s: expected %s, found %s", e.Path, e.Line, e.Column, e.Expected, e.Found)
}

// reason groups bad rows for the --skip-bad summary.
func (e *BadRowError) reason() string { return e.Column + ": expected " + e.Expected }

func bad(path string, line int64, col, expected string, found []byte) *BadRowError {
	return &BadRowError{Path: path, Line: line, Column: col, Expected: expected, Found: quoteFound(found)}
}

// quoteFound shows a found value quoted and shortened so a binary or huge
// field cannot flood the terminal.
func quoteFound(b []byte) string {
	const max = 60
	if len(b) == 0 {
		return `""`
	}
	s := string(b)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// NotTraceError says that an input is a known kind of file that is not a
// request trace, and why it cannot be converted.
type NotTraceError struct {
	Path, What, Why string
}

func (e *NotTraceError) Error() string {
	return fmt.Sprintf("%s: this is %s, not a request trace: %s", e.Path, e.What, e.Why)
}

// Stats counts what a conversion did besides writing rows, for the stderr summary.
type Stats struct {
	Read      int64            // requests parsed from the input(s)
	Written   int64            // rows written
	Skipped   map[string]int64 // bad rows skipped by --skip-bad, per reason
	Filtered  int64            // rows removed by --start/--end/--sample/--filter-model/--limit
	Reordered bool             // input was out of arrival order and was sorted in memory
	Regrouped bool             // session turns were far from their roots and were buffered to regroup them
}

func (s *Stats) skip(e *BadRowError) {
	if s.Skipped == nil {
		s.Skipped = map[string]int64{}
	}
	s.Skipped[e.reason()]++
}

// SkippedTotal returns the number of skipped bad rows.
func (s *Stats) SkippedTotal() int64 {
	var n int64
	for _, v := range s.Skipped {
		n += v
	}
	return n
}

// Report writes the skipped-row counts, sorted by reason, to w.
func (s *Stats) Report(tool string, w io.Writer) {
	if len(s.Skipped) == 0 {
		return
	}
	reasons := make([]string, 0, len(s.Skipped))
	for r := range s.Skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: skipped %d bad row(s):\n", tool, s.SkippedTotal())
	for _, r := range reasons {
		fmt.Fprintf(&b, "  %8d  %s\n", s.Skipped[r], r)
	}
	io.WriteString(w, b.String())
}

// BadInput marks the error as bad input (exit status 2; see lib/badinput).
func (e *BadRowError) BadInput() bool { return true }

// BadInput marks the error as bad input (exit status 2; see lib/badinput).
func (e *NotTraceError) BadInput() bool { return true }
