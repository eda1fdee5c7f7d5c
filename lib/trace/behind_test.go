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

type decisionsWriter struct{ rows []Decision }

func (w *decisionsWriter) Write(d *Decision) error {
	c := *d
	c.Candidates = append([]Candidate(nil), d.Candidates...)
	c.Filtered = append([]Filtered(nil), d.Filtered...)
	w.rows = append(w.rows, c)
	return nil
}
func (w *decisionsWriter) Close() error { return nil }
func (w *decisionsWriter) Abort()       {}

// TestBehindDecisions: the recorder reuses a decision row's candidate and
// filtered lists for its next row; the rows written hold what each row had.
func TestBehindDecisions(t *testing.T) {
	w := &decisionsWriter{}
	b := NewBehind[Decision](w)
	var d Decision
	n := 3*behindRows + 17
	for i := range n {
		d.Reset()
		d.Seq = int64(i)
		for j := range i % 4 {
			d.Candidates = append(d.Candidates, Candidate{ReplicaID: fmt.Sprint("r", j), Waiting: int32(i)})
		}
		if i%5 == 0 {
			d.Filtered = append(d.Filtered, Filtered{ReplicaID: fmt.Sprint("f", i), Reason: "full"})
		}
		if err := b.Write(&d); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if len(w.rows) != n {
		t.Fatalf("%d rows, want %d", len(w.rows), n)
	}
	for i, r := range w.rows {
		if r.Seq != int64(i) || len(r.Candidates) != i%4 || (len(r.Filtered) == 1) != (i%5 == 0) {
			t.Fatalf("row %d: %+v", i, r)
		}
		for j, c := range r.Candidates {
			if c.ReplicaID != fmt.Sprint("r", j) || c.Waiting != int32(i) {
				t.Fatalf("row %d candidate %d: %+v (overwritten by a later row?)", i, j, c)
			}
		}
		if len(r.Filtered) == 1 && r.Filtered[0].ReplicaID != fmt.Sprint("f", i) {
			t.Fatalf("row %d filtered: %+v", i, r.Filtered)
		}
	}
}
