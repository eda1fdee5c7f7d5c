package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/report/pagetest"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

// The pages of testdata/pages (real runs of the tools, made as its README
// says) drawn and checked in headless Chromium: no console error, every
// chart drew data, nothing overflows its frame, and every figure looks like
// its reference screenshot in testdata/screens (-update rewrites them).
func TestPagesInBrowser(t *testing.T) {
	b := pagetest.Start(t)
	dir := t.TempDir()
	pages := filepath.Join("testdata", "pages")
	in := func(name string) string { return filepath.Join(pages, name) }
	results := func(paths []string, o Options) func(string) error {
		return func(out string) error {
			o.Charts = true
			rep, err := Build(paths, o)
			if err != nil {
				return err
			}
			return rep.WriteHTMLFile(out)
		}
	}
	sweep := func(table string, o SweepOptions) func(string) error {
		return func(out string) error {
			st, err := ReadSweep(in(table))
			if err != nil {
				return err
			}
			return st.WriteHTMLFile(out, o)
		}
	}
	for _, c := range []struct {
		name   string
		write  func(string) error
		charts int // charts that must have drawn data
	}{
		// Two routers on the same agentic requests, with steps and decisions:
		// latency comparison, request-by-request errors, heat strips, the
		// session timeline and split, regret and the worst decisions.
		{"run", results([]string{in("agents.results.parquet"), in("agents_rr.results.parquet")},
			Options{Steps: in("agents.steps.parquet"), Decisions: in("agents.decisions.parquet")}), 22},
		{"autoscale", results([]string{in("scale.results.parquet")}, Options{ScaleEvents: in("scale.events.parquet")}), 9},
		{"pd", results([]string{in("pd.results.parquet")}, Options{}), 11},
		{"tiers", results([]string{in("tiers.results.parquet")}, Options{}), 10},
		{"simreal", results([]string{in("simreal.results.parquet")}, Options{}), 17},
		{"sweep", sweep("grid.points.parquet", SweepOptions{}), 10},
		// The runs table with replicas on x: wide CIs cut at zero and at the
		// frame (issue 32, item 17).
		{"sweep-runs", sweep("grid.runs.parquet", SweepOptions{X: "replicas", Metrics: []string{"slo_all_met_pct", "ttft_p99_ms"}}), 3},
		{"capacity", func(out string) error {
			var c Capacity
			data, err := os.ReadFile(in("capacity.json"))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(data, &c); err != nil {
				return err
			}
			return c.WriteHTMLFile(out)
		}, 4},
		{"pareto", func(out string) error { return paretoFixture().WriteHTMLFile(out) }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".html")
			if err := c.write(path); err != nil {
				t.Fatal(err)
			}
			html, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Self-contained: nothing fetched (the SVG namespace is a name, not a fetch).
			clean := bytes.ReplaceAll(html, []byte(`xmlns="http://www.w3.org/2000/svg"`), nil)
			for _, bad := range []string{"http://", "https://", "src=", "@import", "url(http"} {
				if bytes.Contains(clean, []byte(bad)) {
					t.Errorf("the page references %q: it must be self-contained", bad)
				}
			}
			if bytes.Contains(html, []byte("NaN")) || bytes.Contains(html, []byte("Inf")) {
				t.Errorf("NaN or Inf in the page")
			}
			pg := b.Check(t, path, filepath.Join("testdata", "screens", c.name), *update)
			if pg.Charts != c.charts {
				t.Errorf("%d charts drew data, want %d (figures: %s)", pg.Charts, c.charts, strings.Join(pg.Figures, ", "))
			}
			for _, f := range pg.Figures {
				if !bytes.Contains(html, []byte(`id="`+f+`"`)) {
					t.Errorf("figure %s not in the page", f)
				}
			}
		})
	}
}

// paretoFixture is a ranking of six routers (blis-report --fitness on
// examples/evolve/fitness.yaml over runs of examples/workloads/react.yaml's workload)
// and three candidates of a policy search crowded near one of them, with
// long names, so that labels collide and some are numbered.
func paretoFixture() *Pareto {
	pp := &Pareto{Title: "evolve-demo", X: ParetoAxis{Metric: "goodput", Maximize: true}, Y: ParetoAxis{Metric: "ttft_p99.interactive"}}
	pp.Points = append(pp.Points, []ParetoPoint{
		{Label: "run-prefix-affinity.arrows", X: 18.4703, Y: 49.6480, Rank: 1, Front: true, Feasible: true, Primary: 1.2148},
		{Label: "run-round-robin.arrows", X: 18.6356, Y: 103.3510, Rank: 1, Front: true, Feasible: true, Primary: 1.2079},
		{Label: "run-power-of-two.arrows", X: 18.6081, Y: 111.9860, Rank: 2, Feasible: true, Primary: 1.2032},
		{Label: "run-least-loaded.arrows", X: 18.6240, Y: 116.1070, Rank: 2, Feasible: true, Primary: 1.2029},
		{Label: "run-random.arrows", X: 18.5943, Y: 116.1200, Rank: 3, Feasible: true, Primary: 1.2009},
		{Label: "run-least-kv.arrows", X: 18.6236, Y: 127.0360, Rank: 3, Feasible: true, Primary: 1.1992},
		{Label: "candidates/generation-12/mutant-07-prefix-weight-0.35.arrows", X: 18.6300, Y: 115.2, Rank: 2, Feasible: true, Primary: 1.2030},
		{Label: "candidates/generation-12/mutant-08-prefix-weight-0.40.arrows", X: 18.6290, Y: 114.8, Rank: 2, Feasible: true, Primary: 1.2031},
		{Label: "candidates/generation-12/mutant-09-queue-limit-4.arrows", X: 18.2100, Y: 60.5, Rank: 4, Feasible: false, Primary: 1.18,
			Violations: []string{"completed_fraction >= 0.5 (0.42)"}},
	}...)
	pp.Table = &Table{Name: "ranking", Title: "Ranking by evolve-demo", Columns: []string{"rank", "run", "goodput", "ttft_p99.interactive"}}
	for _, q := range pp.Points {
		pp.Table.add(integer(int64(q.Rank)), txt(q.Label), num(q.X, 4), num(q.Y, 4))
	}
	return pp
}
