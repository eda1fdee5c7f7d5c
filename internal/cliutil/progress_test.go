package cliutil

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressOffUnlessTerminalOrForced(t *testing.T) {
	var b bytes.Buffer
	if p := NewProgress(&b, "tool", "requests", 10, false, false); p != nil {
		t.Fatal("progress on a non-terminal without --progress")
	}
	var nilp *Progress
	nilp.Update(1, "x") // a nil Progress is off, not a crash
	nilp.Finish(1)
}

func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "tool", "requests", 100, true, true)
	p.start = time.Now().Add(-10 * time.Second)
	p.Update(25, "simulated 1m0s") // the first update prints at once
	p.Update(30, "simulated 1m5s") // the next only after PlainEvery
	p.Finish(100)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"tool: 25/100 requests (25%), simulated 1m0s, 10s elapsed, ETA 30s",
		"tool: 100/100 requests (100%), simulated 1m5s, 10s elapsed",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %q", lines)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}
}

// TestProgressETAFollowsTheSchedule: a run that sends on a schedule ends
// when its schedule does, whatever the rows done so far say (a load that
// ramps up made blis-load's first ETA 2 h for an 8-minute run); after the
// schedule's end, the rows left at the rate so far (issue 32, item 5).
func TestProgressETAFollowsTheSchedule(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "blis-load", "rows", 100, true, false)
	p.start = time.Now().Add(-10 * time.Second)
	p.Schedule(60 * time.Second)
	p.Update(5, "sent 6")
	p.start = time.Now().Add(-80 * time.Second)
	p.last = time.Time{}
	p.Update(80, "sent 100")
	want := "blis-load: 5/100 rows (5%), sent 6, 10s elapsed, ETA 50s (the schedule's end)\n" +
		"blis-load: 80/100 rows (80%), sent 100, 1m20s elapsed, ETA 20s\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
