package load

import (
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/load/fakellm"
	"github.com/blis-sim/blis/lib/trace"
)

// TestFailureKind: failures are counted by kind, not by message, so that
// numbers in messages do not make new kinds (issue 32, item 14: with a
// server killed mid-run, "stream ended without [DONE] after N chunks"
// filled the 8 kinds kept and 57 "connection refused" went unmentioned).
func TestFailureKind(t *testing.T) {
	for _, tc := range []struct {
		reason string
		code   int
		want   string
	}{
		{"HTTP 503: overloaded, retry in 12 s", 503, "HTTP 503"},
		{"HTTP 500: CUDA out of memory at step 1234", 500, "HTTP 500"},
		{"stream ended without [DONE] after 17 chunks", 200, "stream ended without [DONE]"},
		{"stream ended without [DONE] after 3 chunks", 200, "stream ended without [DONE]"},
		{"connection: connection refused", 0, "connection: connection refused"},
		{"connection: dial tcp 10.0.0.7:8000: i/o timeout", 0, "connection: dial tcp N.N.N.N:N: i/o timeout"},
		{"stream: read tcp 127.0.0.1:51234->127.0.0.1:8000: use of closed network connection", 200,
			"stream: read tcp N.N.N.N:N->N.N.N.N:N: use of closed network connection"},
		{"server error in the stream: out of memory for request 77", 200, "server error in the stream"},
		{`the response is "text/html", not an event stream (does the server stream?): <html>`, 200, "the response is not an event stream"},
		{"client timeout after 30000000 µs", 0, "client timeout"},
		{"dependency chat-12-t3 failed", 0, "a dependency was failed"},
	} {
		if got := FailureKind(tc.reason, tc.code); got != tc.want {
			t.Errorf("FailureKind(%q, %d) = %q, want %q", tc.reason, tc.code, got, tc.want)
		}
	}
}

// TestIssueLagIsSentMinusDue: the summary's issue error is sent − due, as
// the chunks table's due and sent events give it, a --concurrency slot's
// wait included (issue 32, item 15: it was measured from the later of the
// due time and the moment the request was armed, which hides a late
// dispatcher). Two requests due at once, one slot, 30 ms each: the second
// is sent at least 30 ms after it was due.
func TestIssueLagIsSentMinusDue(t *testing.T) {
	srv := fakellm.New(fakellm.Config{TTFT: 30 * time.Millisecond, ITL: time.Millisecond})
	defer srv.Close()
	path := writeTable(t, []trace.Request{llm("a", 0, 16, 1), llm("b", 0, 16, 1)}, true, 0)
	sum, _, _ := session(t, srv, Completions, path, Options{Timing: TimingTrace, Speedup: 1, Concurrency: 1})
	if sum.Completed != 2 {
		t.Fatalf("completed %d: %+v", sum.Completed, sum.Reasons)
	}
	if m := sum.IssueLag.Max(); m < 30000 {
		t.Errorf("max sent − due %d µs, want ≥ 30 ms (the second request waited for the slot)", m)
	}
	if m := sum.SlotWait.Max(); m < 30000 {
		t.Errorf("max slot wait %d µs, want ≥ 30 ms", m)
	}
}
