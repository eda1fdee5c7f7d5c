package trace

import (
	"bytes"
	"io"
	"reflect"
	"runtime"
	"testing"
	"time"
)

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
