package measure

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// csvTable reads a CSV with a header and looks fields up by name, so that
// column order and extra columns do not matter.
type csvTable struct {
	path string
	r    *csv.Reader
	col  map[string]int
	rec  []string
	line int
}

func newCSVTable(path string, r io.Reader, required ...string) (*csvTable, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = false
	cr.FieldsPerRecord = 0
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &InputError{Path: path, Line: 1, Msg: "expected a CSV header, found an empty file"}
		}
		return nil, &InputError{Path: path, Line: 1, Msg: err.Error()}
	}
	t := &csvTable{path: path, r: cr, col: map[string]int{}, line: 1}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		t.col[h] = i
	}
	for _, name := range required {
		if _, ok := t.col[name]; !ok {
			return nil, &InputError{Path: path, Line: 1, Field: name, Msg: fmt.Sprintf("expected a column %q in the header, found %q", name, strings.Join(header, ","))}
		}
	}
	return t, nil
}

func (t *csvTable) has(name string) bool { _, ok := t.col[name]; return ok }

// next reads a record; io.EOF at the end.
func (t *csvTable) next() error {
	rec, err := t.r.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return &InputError{Path: t.path, Line: pe.Line, Msg: pe.Err.Error()}
		}
		return &InputError{Path: t.path, Line: t.line + 1, Msg: err.Error()}
	}
	t.rec = rec
	line, _ := t.r.FieldPos(0)
	t.line = line
	return nil
}

func (t *csvTable) str(name string) string {
	i, ok := t.col[name]
	if !ok || i >= len(t.rec) {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

func (t *csvTable) errf(field, format string, args ...any) error {
	return &InputError{Path: t.path, Line: t.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// float reads a finite number; positive demands > 0.
func (t *csvTable) float(name string, positive bool) (float64, error) {
	s := t.str(name)
	if s == "" {
		return 0, t.errf(name, "expected a number, found an empty field")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, t.errf(name, "expected a finite number, found %q", s)
	}
	if positive && v <= 0 {
		return 0, t.errf(name, "expected a positive value, found %s", s)
	}
	if v < 0 {
		return 0, t.errf(name, "expected a non-negative value, found %s", s)
	}
	return v, nil
}

// count reads a non-negative integer that fits an int32 token count.
func (t *csvTable) count(name string, positive bool) (int, error) {
	s := t.str(name)
	if s == "" {
		return 0, t.errf(name, "expected an integer, found an empty field")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Accept "8.0" as written by pandas, but nothing fractional.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
			return 0, t.errf(name, "expected an integer, found %q", s)
		}
		v = int64(f)
	}
	if v < 0 || v > math.MaxInt32 || (positive && v == 0) {
		want := "a non-negative integer"
		if positive {
			want = "a positive integer"
		}
		return 0, t.errf(name, "expected %s below 2^31, found %s", want, s)
	}
	return int(v), nil
}
