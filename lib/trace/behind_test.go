package trace

import (
	"errors"
	"fmt"
	"testing"
)

// rowsWriter records what Behind hands it; it fails at row failAt (≥ 0).
type rowsWriter struct {
	rows            []Step
	failAt          int
	closed, aborted bool
}

func (w *rowsWriter) Write(s *Step) error {
	if len(w.rows) == w.failAt {
		return errors.New("disk full")
	}
	w.rows = append(w.rows, *s)
	return nil
}
func (w *rowsWriter) Close() error { w.closed = true; return nil }
func (w *rowsWriter) Abort()       { w.aborted = true }

func TestBehind(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rows   int
		failAt int  // the writer's failing row; -1: none
		abort  bool // the caller aborts after writing
	}{
		{"empty", 0, -1, false},
		{"part of a chunk", 7, -1, false},
		{"whole chunks", 3 * behindRows, -1, false},
		{"more chunks than wait", (behindDepth+3)*behindRows + 5, -1, false},
		{"aborted", 2*behindRows + 1, -1, true},
		{"fails in the first chunk", 5 * behindRows, 3, false},
		{"fails in the last rows", behindRows + 10, behindRows + 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &rowsWriter{failAt: tc.failAt}
			b := NewBehind[Step](w)
			var werr error
			s := Step{ReplicaID: "r"}
			for i := 0; i < tc.rows && werr == nil; i++ {
				s.StepIndex, s.ReplicaID = int64(i), fmt.Sprint("r", i%3)
				werr = b.Write(&s) // the caller reuses its row
			}
			if tc.abort {
				b.Abort()
				if !w.aborted || w.closed {
					t.Fatalf("abort: aborted %v closed %v", w.aborted, w.closed)
				}
				return
			}
			cerr := b.Close()
			if tc.failAt >= 0 {
				err := werr
				if err == nil {
					err = cerr
				}
				if err == nil || err.Error() != "disk full" {
					t.Fatalf("write error %v, close error %v: want disk full from one of them", werr, cerr)
				}
				if w.closed {
					t.Fatal("a failed writer was closed")
				}
				b.Abort() // what the caller then does
				if !w.aborted {
					t.Fatal("not aborted")
				}
				return
			}
			if werr != nil || cerr != nil || !w.closed {
				t.Fatalf("write %v close %v closed %v", werr, cerr, w.closed)
			}
			if len(w.rows) != tc.rows {
				t.Fatalf("%d rows written, want %d", len(w.rows), tc.rows)
			}
			for i, r := range w.rows {
				if r.StepIndex != int64(i) || r.ReplicaID != fmt.Sprint("r", i%3) {
					t.Fatalf("row %d: %+v", i, r)
				}
			}
		})
	}
}
