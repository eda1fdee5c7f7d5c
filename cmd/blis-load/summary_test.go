package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/blis-sim/blis/lib/load"
	"github.com/blis-sim/blis/lib/trace"
)

// TestSummaryLines: the send rate is over the sending, not the drain after
// it (issue 32, item 15: 13,050 requests sent in 8.2 s printed 1,488.6/s,
// over the 8.8 s run); every kind of failure is listed, or counted when
// there are too many (item 14: 57 "connection refused" went unmentioned
// after 8 kinds of "stream ended without [DONE] after N chunks").
func TestSummaryLines(t *testing.T) {
	var tl trace.ReasonTally
	for i := 0; i < 8; i++ {
		r := "stream ended without [DONE] after " + strings.Repeat("1", i+1) + " chunks"
		tl.AddClass(trace.StatusFailed, load.FailureKind(r, 200), r, 1)
	}
	for i := 0; i < 57; i++ {
		tl.AddClass(trace.StatusFailed, load.FailureKind("connection: connection refused", 0), "connection: connection refused", 1)
	}
	for i := 0; i < 9; i++ {
		r := "dependency s" + strings.Repeat("7", i+1) + " failed"
		tl.AddClass(trace.StatusDropped, load.FailureKind(r, 0), r, 1)
	}
	lag, wait := hdrhistogram.New(0, 3600e6, 3), hdrhistogram.New(0, 3600e6, 3)
	lag.RecordValue(100)
	sum := load.Summary{Rows: 13124, Completed: 13050, Failed: 65, Dropped: 9, Sent: 13050 + 65, LastSent: 8_156_000,
		Elapsed: 8800 * time.Millisecond, Tokens: 100000, IssueLag: lag, SlotWait: wait,
		Reasons: tl.Counts(load.FailureStatuses...)}
	var b bytes.Buffer
	printSummary(&b, &sum, &load.Stats{Rows: 13124}, &load.Options{Timing: load.TimingTrace})
	out := b.String()
	for _, want := range []string{
		"blis-load: 13115 requests sent in 8.2 s (1608.0/s); 8.8 s in all, to the last response: 100000 output tokens (11364/s)",
		"blis-load: sent − due (how late requests went): p50 100 µs",
		"        57 failed    connection: connection refused\n",
		"         8 failed    stream ended without [DONE] (e.g. stream ended without [DONE] after 1 chunks)\n",
		"         9 dropped   a dependency was failed (e.g. dependency s7 failed)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
