package sim_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/trace"
)

var errFull = errors.New("no space left on device")

// fullAfter accepts n bytes, then fails every write.
type fullAfter struct{ n int }

func (w *fullAfter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errFull
	}
	w.n -= len(p)
	return len(p), nil
}

// settled fails t unless the goroutines are back to base: the tables'
// writers and the input's decoder end with a failed run.
func settled(t *testing.T, base int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > base; i++ {
		if i == 400 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left running, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// writeSorted writes rows, in arrival order, as a requests table marked
// sorted (streamed by OpenInput).
func writeSorted(t *testing.T, path string, rows []trace.Request) {
	t.Helper()
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	writeTable(t, path, md, rows)
}

// writeTable writes rows to a requests table at path with metadata md.
func writeTable(t *testing.T, path string, md trace.Meta, rows []trace.Request) {
	t.Helper()
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(path, nil, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, schema)
	for i := range rows {
		if err := w.Write(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// dirHolds fails t unless dir holds just the names given: a failed run
// leaves no table, not even a temporary one.
func dirHolds(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(names, " ") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

// A failed write (a full disk under the steps table) and a bad row in the
// middle of a streamed input (decoded ahead of the simulation, while the
// input is hashed beside it) end the run with the same errors as when
// both were done on the simulation's goroutine, remove every output, and
// leave no goroutine behind.
func TestFailedRunEndsItsGoroutines(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("replicas: 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := leapWorkload(8000, 50)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.arrows")
	bad := append([]trace.Request(nil), reqs...)
	bad[4321].OutputTokens = -3
	badIn := filepath.Join(dir, "bad.arrows")
	writeSorted(t, in, reqs)
	writeSorted(t, badIn, bad)
	for _, tc := range []struct {
		name    string
		input   string
		steps   func() sim.Output
		wantIs  error
		wantMsg string
	}{
		{"steps write fails mid-run", in, func() sim.Output {
			return sim.Output{Path: "-", W: &fullAfter{n: 0}, Label: "--steps"}
		}, errFull, ""},
		{"bad row in the input", badIn, func() sim.Output {
			return sim.Output{Path: filepath.Join(dir, "steps.arrows"), Label: "--steps"}
		}, nil, "bad.arrows: row 4322 (request r4321): column output_tokens: expected >= 0, found -3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			s, err := sim.New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			input, err := sim.OpenInput(tc.input, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := &sim.Run{Source: input.Source, Path: input.Path, InputMeta: input.Meta, Stage: trace.Stage{Tool: "test"},
				Results: sim.Output{Path: filepath.Join(dir, "res.arrows")}, Steps: tc.steps()}
			_, err = s.Run(r)
			input.Close()
			switch {
			case err == nil:
				t.Fatal("the run succeeded")
			case tc.wantIs != nil && !errors.Is(err, tc.wantIs):
				t.Fatalf("got %v, want %v", err, tc.wantIs)
			case tc.wantMsg != "" && !strings.HasSuffix(err.Error(), tc.wantMsg):
				t.Fatalf("got  %v\nwant ...%s", err, tc.wantMsg)
			}
			dirHolds(t, dir, "bad.arrows", "in.arrows")
			settled(t, base)
		})
	}
	// The same input runs whole (the reader and writers are not at fault).
	base := runtime.NumGoroutine()
	s, err := sim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &sim.Run{Source: engine.SliceSource(reqs), Path: "test", InputMeta: trace.NewMeta(), Stage: trace.Stage{Tool: "test"},
		Results: sim.Output{Path: filepath.Join(dir, "res.arrows")}}
	if _, err := s.Run(r); err != nil {
		t.Fatal(err)
	}
	settled(t, base)
}

// The input's hash, computed beside the run (Run.LateInputs), reaches the
// provenance of every table: streams (whose header waits for it) and
// files (created once it is known), small tables and ones of many batches.
func TestLateInputsReachEveryTable(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte("replicas: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.arrows")
	writeSorted(t, in, leapWorkload(300, 50))
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%x", sha256.Sum256(data))
	for _, ext := range []string{"arrows", "arrow"} {
		s, err := sim.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		input, err := sim.OpenInput(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := func(name string) sim.Output { return sim.Output{Path: filepath.Join(dir, name+"."+ext)} }
		r := &sim.Run{Source: input.Source, Path: input.Path, InputMeta: input.Meta, Stage: trace.Stage{Tool: "test"},
			LateInputs: input.Inputs, Results: out("res"), Steps: out("steps"), ScaleEvents: out("scale")}
		_, err = s.Run(r)
		input.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"res", "steps", "scale"} {
			src, err := trace.Open(filepath.Join(dir, name+"."+ext), nil)
			if err != nil {
				t.Fatal(err)
			}
			p := src.Meta().Provenance
			src.Close()
			if len(p) == 0 || len(p[len(p)-1].Inputs) != 1 || p[len(p)-1].Inputs[0].SHA256 != want {
				t.Errorf("%s.%s: provenance %+v, want the input's sha256 %s", name, ext, p, want)
			}
		}
	}
}
