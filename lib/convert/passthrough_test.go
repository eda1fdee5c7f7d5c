package convert

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

// TestOtherTablesAreCopied: a results (or steps, chunks) table given to
// blis-convert changes format only: same kind, columns, rows and metadata,
// one more provenance stage. It used to be read as requests, losing every
// result column; the replay options are refused for it.
func TestOtherTablesAreCopied(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "results.arrow")
	md := trace.NewMeta()
	md.Set("blis.sim.model", "roofline:x")
	md = md.With(trace.Stage{Tool: "blis-sim", Version: trace.Version})
	s := trace.ResultsSchema(md)
	sink, err := trace.Create(in, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewResultWriter(sink, s)
	for i, id := range []string{"b", "a", "c"} {
		r := trace.NewRequest(id)
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(10-i), 5, 5
		res := trace.NewResult(r)
		res.Status, res.TTFTUS = trace.StatusCompleted, int64(100*i)
		if err := w.Write(&res); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".parquet", ".arrows", ".arrow"} {
		out := filepath.Join(dir, "copy"+ext)
		st, err := Convert(Options{Inputs: []string{in}, Tool: "blis-convert"}, out, nil, nil)
		if err != nil || st.Written != 3 {
			t.Fatalf("%s: %v, %+v", ext, err, st)
		}
		src, err := trace.Open(out, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := trace.ReadAllResults(src)
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
		m := src.Meta()
		if m.Table() != trace.TableResults || m.Get("blis.sim.model") != "roofline:x" || len(m.Provenance) != 2 || m.Provenance[1].Tool != "blis-convert" {
			t.Errorf("%s: metadata %q %q %+v", ext, m.Table(), m.Get("blis.sim.model"), m.Provenance)
		}
		if len(got) != 3 || got[0].ID != "b" || got[2].TTFTUS != 200 || got[1].Status != trace.StatusCompleted {
			t.Errorf("%s: rows %+v", ext, got)
		}
		if n, _, err := Count(Options{Inputs: []string{out}}, nil); err != nil || n != 3 {
			t.Errorf("%s: --count %d, %v", ext, n, err)
		}
	}
	_, err = Convert(Options{Inputs: []string{in}, Start: "1m"}, filepath.Join(dir, "x.parquet"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "--start applies to requests tables") {
		t.Fatalf("--start on a results table: %v", err)
	}
}
