package synth

import (
	"io"
	"reflect"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// A stream hands over exactly the rows Generate emits, in order and with
// their own slices, then io.EOF at every call; closing it early stops the
// generator.
func TestStream(t *testing.T) {
	for _, name := range []string{"chat-multiturn", "react"} {
		t.Run(name, func(t *testing.T) {
			s := mustExample(t, name)
			s.NumRequests = 3 * streamRows / 2
			want, _ := collect(t, s)
			st := NewStream(s)
			var got []trace.Request
			for {
				b, err := st.Next(nil)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, b...)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("stream gave %d rows, Generate %d; they differ", len(got), len(want))
			}
			if _, err := st.Next(nil); err != io.EOF {
				t.Fatalf("after the end: %v, want io.EOF", err)
			}
			st.Close()

			early := NewStream(s)
			if b, err := early.Next(nil); err != nil || len(b) != min(len(want), streamRows) {
				t.Fatalf("first batch: %d rows, %v", len(b), err)
			}
			early.Close() // returns: the generator saw the stop
		})
	}
}
