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

// TestProgressETANotBeforeTheSchedule: a run whose last request is due
// later cannot end sooner than that, whatever the rate so far says
// (blis-load: issue 32, item 5).
func TestProgressETANotBeforeTheSchedule(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, "blis-load", "rows", 100, true, false)
	p.start = time.Now().Add(-10 * time.Second)
	p.NotBefore(60 * time.Second)
	p.Update(50, "sent 52")
	if got, want := strings.TrimSpace(b.String()), "blis-load: 50/100 rows (50%), sent 52, 10s elapsed, ETA 50s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
