package trace

import (
	"reflect"
	"strings"
	"testing"
)

func TestReasonClass(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"needs 40 KV blocks (630 tokens), an instance has 10", "needs more KV blocks than a replica has"},
		{"needs 40 KV blocks (630 tokens), a replica of llama8b-h100 has 10", "needs more KV blocks than a replica of llama8b-h100 has"},
		{"needs 134217728 KV blocks (2147483647 tokens): more than 2147483631 tokens per request", "more tokens than a request can have"},
		{"dependency s1/t3 dropped", "a dependency was dropped"},
		{"dependency r9 timed_out", "a dependency was timed_out"},
		{"client timeout after 30000000 µs", "client timeout"},
		{"no deployment serves model qwen3-14b", "no deployment serves model qwen3-14b"},
		{"queue-limit: 57 requests queued cluster-wide (limit 50)", "queue-limit"},
		{"arrives after horizon", "arrives after horizon"},
		{"HTTP 503 after 12 ms", "HTTP N after N ms"},
		{"", ""},
	} {
		if got := ReasonClass(c.in); got != c.want {
			t.Errorf("ReasonClass(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestReasonTally(t *testing.T) {
	var rt ReasonTally
	rt.Add(StatusRejected, "queue-limit: 5 requests queued cluster-wide (limit 4)")
	rt.Add(StatusDropped, "needs 40 KV blocks (630 tokens), an instance has 10")
	rt.Add(StatusDropped, "dependency a dropped")
	rt.Add(StatusDropped, "needs 41 KV blocks (640 tokens), an instance has 10")
	rt.Add(StatusCompleted, "")
	rt.AddN(StatusRejected, "queue-limit: 9 requests queued cluster-wide (limit 4)", 2)
	got := rt.Counts(StatusDropped, StatusRejected)
	want := []ReasonCount{
		{StatusDropped, "needs more KV blocks than a replica has", 2, "needs 40 KV blocks (630 tokens), an instance has 10"},
		{StatusDropped, "a dependency was dropped", 1, "dependency a dropped"},
		{StatusRejected, "queue-limit", 3, "queue-limit: 5 requests queued cluster-wide (limit 4)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if rt.Total(StatusDropped) != 3 || rt.Total(StatusRejected) != 3 {
		t.Fatalf("totals %d %d", rt.Total(StatusDropped), rt.Total(StatusRejected))
	}
}

// TestWriteReasons: every kind is listed, or the ones left out are counted
// (issue 32, item 14: blis-load kept the first 8 kinds and never said more
// were left out).
func TestWriteReasons(t *testing.T) {
	var tl ReasonTally
	tl.AddClass(StatusFailed, "connection refused", "connection: connection refused", 57)
	tl.AddClass(StatusFailed, "stream cut", "stream ended without [DONE] after 3 chunks", 9)
	tl.AddClass(StatusRejected, "HTTP 429", "HTTP 429: too many requests", 5)
	tl.Add(StatusTimedOut, "client timeout after 1000 µs")
	tl.Add(StatusTimedOut, "client timeout after 2000 µs")
	counts := tl.Counts(StatusFailed, StatusRejected, StatusTimedOut)
	var all, capped strings.Builder
	WriteReasons(&all, "  ", counts, 0)
	WriteReasons(&capped, "  ", counts, 2)
	if want := "" +
		"        57 failed    connection refused (e.g. connection: connection refused)\n" +
		"         9 failed    stream cut (e.g. stream ended without [DONE] after 3 chunks)\n" +
		"         5 rejected  HTTP 429 (e.g. HTTP 429: too many requests)\n" +
		"         2 timed_out client timeout (e.g. client timeout after 1000 µs)\n"; all.String() != want {
		t.Errorf("all:\n%s\nwant\n%s", all.String(), want)
	}
	if want := "" +
		"        57 failed    connection refused (e.g. connection: connection refused)\n" +
		"         9 failed    stream cut (e.g. stream ended without [DONE] after 3 chunks)\n" +
		"         7 rows of 2 more kinds (the drop_reason column has every one)\n"; capped.String() != want {
		t.Errorf("capped:\n%s\nwant\n%s", capped.String(), want)
	}
}
