package trace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func sampleRequests(n int) []Request {
	out := make([]Request, n)
	for i := range out {
		r := NewRequest("r" + string(rune('a'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260)))
		r.ArrivalUS = int64(i) * 1000
		r.InputTokens, r.OutputTokens = int32(100+i), int32(10+i%7)
		r.TenantID = []string{"", "acme", "globex"}[i%3]
		r.Model = "llama"
		if i%4 == 1 {
			r.DependsOn = []string{out[i-1].ID}
			r.ArrivalUS = Null
			r.DelayUS = 500
		}
		if i%5 == 0 {
			r.PrefixHashes = []uint64{uint64(i), 1<<63 + 7}
		}
		if i%6 == 0 {
			r.RecordedTTFTUS = 1234
		}
		r.SourceRow = int64(i + 2)
		out[i] = r
	}
	return out
}

func writeRequests(t *testing.T, path string, w io.Writer, reqs []Request) {
	t.Helper()
	md := NewMeta()
	md.Set(MetaPrefixBlockSize, "16")
	md = md.With(Stage{Tool: "test", Version: Version})
	s := RequestsSchema(md)
	sink, err := Create(path, w, s)
	if err != nil {
		t.Fatal(err)
	}
	rw := NewRequestWriter(sink, s)
	for i := range reqs {
		if err := rw.Write(&reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRequestsRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	Alloc = mem
	defer func() { Alloc = memory.DefaultAllocator }()
	reqs := sampleRequests(BatchRows + 100) // two batches: dictionaries grow across them
	dir := t.TempDir()
	for _, name := range []string{"-", "t.arrows", "t.arrow"} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			path := name
			if name != "-" {
				path = filepath.Join(dir, name)
			}
			writeRequests(t, path, &buf, reqs)
			src, err := Open(path, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if src.Meta().Table() != TableRequests || src.Meta().Get(MetaPrefixBlockSize) != "16" || len(src.Meta().Provenance) != 1 {
				t.Fatalf("metadata lost: %+v", src.Meta())
			}
			got, err := ReadAllRequests(src)
			src.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, reqs) {
				for i := range got {
					if !reflect.DeepEqual(got[i], reqs[i]) {
						t.Fatalf("row %d: got %+v want %+v", i, got[i], reqs[i])
					}
				}
				t.Fatalf("got %d rows want %d", len(got), len(reqs))
			}
		})
	}
	mem.AssertSize(t, 0)
}

func TestTruncatedStreamIsAnError(t *testing.T) {
	var buf bytes.Buffer
	writeRequests(t, "-", &buf, sampleRequests(BatchRows+5))
	cut := buf.Bytes()[:buf.Len()-8] // drop the end-of-stream marker
	src, err := Open("-", bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ReadAllRequests(src)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("got %v, want ErrTruncated", err)
	}
}

func TestBadRowNamesColumnAndRow(t *testing.T) {
	reqs := sampleRequests(3)
	reqs[2].InputTokens = -4
	var buf bytes.Buffer
	writeRequests(t, "-", &buf, reqs)
	src, _ := Open("-", &buf)
	_, err := ReadAllRequests(src)
	var re *RowError
	if !errors.As(err, &re) || re.Row != 3 || re.SourceRow != 4 {
		t.Fatalf("got %v", err)
	}
	want := "<stdin>: row 3 (request rc00, source row 4): column input_tokens: expected >= 0, found -4"
	if err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err.Error(), want)
	}
}

func TestResultsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	s := ResultsSchema(NewMeta())
	sink, err := Create("-", &buf, s)
	if err != nil {
		t.Fatal(err)
	}
	w := NewResultWriter(sink, s)
	var want []Result
	for i, r := range sampleRequests(10) {
		res := NewResult(r)
		res.Status = StatusCompleted
		if i%3 == 0 {
			res.InstanceID, res.TTFTUS, res.Preemptions = int32(i%2), int64(i*7), int32(i)
		} else {
			res.Status, res.DropReason = StatusDropped, "prompt exceeds KV capacity"
		}
		want = append(want, res)
		if err := w.Write(&res); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src, _ := Open("-", &buf)
	got, err := ReadAllResults(src)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results differ:\n%+v\n%+v", got[0], want[0])
	}
}

// A stream saved under a file-format name (`blis-sim > x.arrow`) still reads.
func TestStreamUnderFileName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.arrow")
	reqs := sampleRequests(3)
	writeRequests(t, "-", writeFile(t, path), reqs)
	src, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := ReadAllRequests(src)
	if err != nil || len(got) != 3 {
		t.Fatalf("got %d rows, %v", len(got), err)
	}
}

func writeFile(t *testing.T, path string) io.Writer {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// An IPC file piped into a tool (`blis-sim < results.arrow`) reads like a stream.
func TestStdinCarriesIPCFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.arrow")
	writeRequests(t, path, nil, sampleRequests(5))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Open("-", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadAllRequests(src)
	src.Close()
	if err != nil || len(got) != 5 {
		t.Fatalf("got %d rows, %v", len(got), err)
	}
}

// Content errors are marked as bad input (exit status 2 in every tool).
func TestContentErrorsAreBadInput(t *testing.T) {
	var buf bytes.Buffer
	writeRequests(t, "-", &buf, sampleRequests(BatchRows+5))
	for name, data := range map[string][]byte{
		"truncated": buf.Bytes()[:buf.Len()-8],
		"garbage":   []byte("TIMESTAMP,ContextTokens\n1,2\n"),
		"empty":     nil,
	} {
		_, err := func() ([]Request, error) {
			src, err := Open("-", bytes.NewReader(data))
			if err != nil {
				return nil, err
			}
			defer src.Close()
			return ReadAllRequests(src)
		}()
		var bi interface{ BadInput() bool }
		if !errors.As(err, &bi) {
			t.Errorf("%s: %v is not marked as bad input", name, err)
		}
	}
}

// A stream cut inside its first message is truncated, not empty.
func TestCutInSchemaIsTruncated(t *testing.T) {
	var buf bytes.Buffer
	writeRequests(t, "-", &buf, sampleRequests(3))
	_, err := Open("-", bytes.NewReader(buf.Bytes()[:100]))
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("got %v, want ErrTruncated", err)
	}
	_, err = Open("-", bytes.NewReader(nil))
	if err == nil || !strings.Contains(err.Error(), "empty input") {
		t.Fatalf("got %v, want empty input", err)
	}
}
