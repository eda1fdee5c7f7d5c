package trace

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

func TestChunksRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	s := ChunksSchema(NewMeta())
	sink, err := Create("-", &buf, s)
	if err != nil {
		t.Fatal(err)
	}
	w := NewChunkWriter(sink, s)
	in := []Chunk{{"a", EventDue, 0, 0, ""}, {"a", EventSent, 3, 0, ""}, {"a", EventChunk, 50, 1, ""}, {"a", EventError, 60, 0, "failed: HTTP 500"}}
	for i := range in {
		if err := w.Write(&in[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := Open("-", &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if src.Meta().Table() != TableChunks {
		t.Fatalf("table %q", src.Meta().Table())
	}
	rec, err := src.Next()
	if err != nil {
		t.Fatal(err)
	}
	ev := rec.Column(1).(*array.Dictionary)
	names := ev.Dictionary().(*array.String)
	for i, c := range in {
		if got := names.Value(ev.GetValueIndex(i)); got != c.Event || rec.Column(2).(*array.Int64).Value(i) != c.TimeUS ||
			rec.Column(3).(*array.Int32).Value(i) != c.Chunk || rec.Column(4).IsNull(i) != (c.Detail == "") {
			t.Errorf("row %d: %s", i, got)
		}
	}
}

// A results table reads as the requests it starts with (a recorded run
// replays).
func TestResultsReadAsRequests(t *testing.T) {
	var buf bytes.Buffer
	s := ResultsSchema(NewMeta())
	sink, _ := Create("-", &buf, s)
	w := NewResultWriter(sink, s)
	reqs := sampleRequests(4)
	for i := range reqs {
		res := NewResult(reqs[i])
		res.Status = StatusCompleted
		if err := w.Write(&res); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	src, err := Open("-", &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := ReadAllRequests(src)
	if err != nil || len(got) != 4 || got[2].ID != reqs[2].ID {
		t.Fatalf("%d requests, %v", len(got), err)
	}
}
