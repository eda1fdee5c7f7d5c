package trace

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// sampleResults are n results of sampleRequests, some with values in the
// tiered-KV columns (the writer's slow path).
func sampleResults(n int) []Result {
	out := make([]Result, n)
	for i, r := range sampleRequests(n) {
		res := NewResult(r)
		res.Status, res.InstanceID, res.TTFTUS = StatusCompleted, int32(i%3), int64(i)
		if i%7 == 0 {
			res.Status, res.DropReason, res.InstanceID = StatusDropped, "prompt exceeds KV capacity", -1
		}
		if i%11 == 0 {
			res.KVReloadUS = int64(i)
		}
		out[i] = res
	}
	return out
}

// writeResults writes rows through w (a ResultWriter or a Pipe over one)
// and returns the stream's bytes.
func writeResults(t *testing.T, rows []Result, piped bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	s := ResultsSchema(NewMeta())
	sink, err := Create("-", &buf, s)
	if err != nil {
		t.Fatal(err)
	}
	var w RowWriter[Result] = NewResultWriter(sink, s)
	if piped {
		w = NewPipe(w)
	}
	for i := range rows {
		if err := w.Write(&rows[i]); err != nil {
			t.Fatal(err)
		}
		rows[i].ID = "changed after Write" // the pipe keeps its own copy
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The same bytes through a pipe, for tables of every size around its
// chunks and the writer's batches.
func TestPipeWritesTheSameBytes(t *testing.T) {
	for _, n := range []int{0, 1, pipeChunk - 1, pipeChunk, pipeChunk + 1, BatchRows + 3*pipeChunk + 5} {
		want := writeResults(t, sampleResults(n), false)
		got := writeResults(t, sampleResults(n), true)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d rows: piped output differs (%d bytes, want %d)", n, len(got), len(want))
		}
	}
}

// failWriter fails its failAt'th Write, and records how it was ended.
type failWriter struct {
	n, failAt       int
	closed, aborted int
}

var errDiskFull = errors.New("results.arrows: write: no space left on device")

func (w *failWriter) Write(*Step) error {
	w.n++
	if w.n == w.failAt {
		return errDiskFull
	}
	return nil
}
func (w *failWriter) Close() error { w.closed++; return nil }
func (w *failWriter) Abort()       { w.aborted++ }

// goroutinesSettle fails t unless the goroutines are back to base.
func goroutinesSettle(t *testing.T, base int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > base; i++ {
		if i == 200 {
			t.Fatalf("%d goroutines left running, %d before", runtime.NumGoroutine(), base)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An inner writer's error comes back unchanged, from a later Write or from
// Close; the output is then aborted once, and the goroutine ends on every
// path.
func TestPipeErrorsAndAbort(t *testing.T) {
	base := runtime.NumGoroutine()
	for _, tc := range []struct {
		name            string
		rows, failAt    int
		abort           bool
		wantErr         error
		closed, aborted int
	}{
		{"ok", 3 * pipeChunk, 0, false, nil, 1, 0},
		{"fails in the last chunk", 3*pipeChunk + 10, 3*pipeChunk + 5, false, errDiskFull, 0, 1},
		{"fails early", 20 * pipeChunk, 2, false, errDiskFull, 0, 1},
		{"aborted by the run", 10 * pipeChunk, 0, true, nil, 0, 1},
		{"aborted before any row", 0, 0, true, nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := &failWriter{failAt: tc.failAt}
			p := NewPipe[Step](fw)
			var err error
			var st Step
			for i := 0; i < tc.rows && err == nil; i++ {
				err = p.Write(&st)
			}
			if tc.abort {
				p.Abort()
			} else if cerr := p.Close(); err == nil {
				err = cerr
			}
			p.Abort() // as sim.Run's cleanup does after a failed Close: no second abort
			if err != tc.wantErr {
				t.Fatalf("got error %v, want %v", err, tc.wantErr)
			}
			if fw.closed != tc.closed || fw.aborted != tc.aborted {
				t.Fatalf("closed %d aborted %d times, want %d and %d", fw.closed, fw.aborted, tc.closed, tc.aborted)
			}
			if tc.failAt == 0 && !tc.abort && fw.n != tc.rows {
				t.Fatalf("wrote %d rows, want %d", fw.n, tc.rows)
			}
		})
	}
	goroutinesSettle(t, base)
}

// ReadAhead returns what the RequestReader would, errors included, and
// stops when closed before the end.
func TestReadAheadMatchesReader(t *testing.T) {
	base := runtime.NumGoroutine()
	good := sampleRequests(BatchRows + 3*decodeRows + 7)
	bad := sampleRequests(2*decodeRows + 5)
	bad[decodeRows+3].InputTokens = -4
	for _, tc := range []struct {
		name   string
		reqs   []Request
		stopAt int // Close after this many Next calls (0: read to the end)
	}{
		{"whole table", good, 0},
		{"bad row", bad, 0},
		{"closed early", good, 1},
		{"closed before reading", good, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			writeRequests(t, "-", &buf, tc.reqs)
			data := buf.Bytes()
			read := func(ahead bool) (rows []Request, err error) {
				src, err := Open("-", bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				rr, err := NewRequestReader(src)
				if err != nil {
					t.Fatal(err)
				}
				next := rr.Next
				if ahead {
					ra := NewReadAhead(rr)
					defer ra.Close()
					next = ra.Next
				}
				var chunk []Request
				for calls := 1; tc.stopAt >= 0; calls++ {
					chunk, err = next(chunk)
					rows = append(rows, chunk...)
					if err != nil || calls == tc.stopAt {
						break
					}
				}
				return rows, err
			}
			want, werr := read(false)
			got, gerr := read(true)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %d rows, want %d (or their values differ)", len(got), len(want))
			}
			if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
				t.Fatalf("got error %v, want %v", gerr, werr)
			}
			if tc.name == "bad row" && (werr == nil || werr == io.EOF) {
				t.Fatalf("the bad row was not reported: %v", werr)
			}
		})
	}
	goroutinesSettle(t, base)
}
