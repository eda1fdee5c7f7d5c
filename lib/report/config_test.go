package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// TestConfigTables: a report starts with what produced each run (read from
// blis-sim's metadata) and the measured error of its latency model; the HTML
// page shows them before the charts and names each input once (issue 10,
// item 7: the report did not say what produced it, and the HTML header
// repeated the file name).
func TestConfigTables(t *testing.T) {
	rep, err := Build([]string{smallResults, smallRef}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) < 2 || rep.Tables[0].Name != "config" || rep.Tables[1].Name != "known_error" {
		t.Fatalf("the report does not start with config and known_error")
	}
	row := func(tb *Table, i int) string {
		var c []string
		for _, x := range tb.Rows[i] {
			c = append(c, x.String())
		}
		return strings.Join(c, "|")
	}
	cfg, known := rep.Tables[0], rep.Tables[1]
	for i, want := range []string{
		"small.results.arrows|qwen3-32b|qwen3-32b|h100|2|2|least-loaded|roofline:qwen3-32b/h100/tp2|1000|blis-sim 0.1.0|42",
		"small_ref.results.arrows|qwen3-32b|qwen3-32b|h100|2|2|least-loaded|fitted:coefficients/qwen3-32b/h100-tp2-vllm-0.12.0.yaml|1000|blis-sim 0.1.0|42",
	} {
		if got := row(cfg, i); got != want {
			t.Errorf("config row %d:\n got %s\nwant %s", i, got, want)
		}
	}
	// docs/latency.md: roofline, Hopper, closed loop C 8–32: 149 points, TTFT 17% (+11%), TPOT 5% (-4%);
	// its five regimes (three closed-loop, two open-loop) come first.
	if got, want := row(known, 0), "small.results.arrows|qwen3-32b|roofline:qwen3-32b/h100/tp2|Hopper|closed loop, C 8–32|149|17|11|5|-4"; got != want {
		t.Errorf("known error row 0:\n got %s\nwant %s", got, want)
	}
	if got, want := row(known, 5), "small_ref.results.arrows|qwen3-32b|fitted:coefficients/qwen3-32b/h100-tp2-vllm-0.12.0.yaml|Hopper|closed loop, C 8–32|28|6|4|3|-1"; got != want {
		t.Errorf("known error row 5:\n got %s\nwant %s", got, want)
	}

	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	h := page.String()
	if i, j := strings.Index(h, `<h3 id="t-config">Run configuration</h3>`), strings.Index(h, `<h2 id="latency">Latency</h2>`); i < 0 || j < 0 || i > j {
		t.Errorf("the HTML does not start with the configuration (at %d, charts at %d)", i, j)
	}
	if li := h[strings.Index(h, `<ul class="inputs">`):strings.Index(h, "</ul>")]; strings.Count(li, "small.results.arrows") != 1 {
		t.Errorf("the header names an input more than once: %s", li)
	}

	// A table without blis-sim's metadata says so rather than guess.
	bare := filepath.Join(t.TempDir(), "bare.arrows")
	writeResults(t, bare, smallRows())
	rep, err = Build([]string{bare}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := row(rep.Tables[0], 0); !strings.Contains(got, "not simulated, or written without blis-sim's metadata") {
		t.Errorf("bare table: %s", got)
	}
	if rep.Tables[1].Name == "known_error" {
		t.Errorf("known error without a latency model")
	}
}

// TestConfigNamesThePolicy: two runs that differ only in their policy
// bundle must not look alike. The bundle's id, generation and stages are in
// a policy column, and the router column names the bundle's routing stage,
// not the built-in router it replaced (issue 32, item 1: a Starlark-routed
// run was labelled round-robin).
func TestConfigNamesThePolicy(t *testing.T) {
	dir := t.TempDir()
	plain, bundled := filepath.Join(dir, "run1.arrows"), filepath.Join(dir, "run2.arrows")
	md := simMeta("roofline:qwen3-32b/h100/tp2")
	md.Set(trace.MetaSimRouter, "round-robin")
	writeResultsMeta(t, plain, smallRows(), md)
	md = simMeta("roofline:qwen3-32b/h100/tp2")
	md.Set(trace.MetaSimRouter, "round-robin") // the default the bundle overrode
	md.Set(trace.MetaPolicyID, "prefix-load")
	md.Set(trace.MetaPolicyGeneration, "2")
	md.Set(trace.MetaPolicyStages, "admission queue-limit; routing starlark prefix-load.star")
	writeResultsMeta(t, bundled, smallRows(), md)

	rep, err := Build([]string{plain, bundled}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rep.Tables[0]
	if got, want := strings.Join(cfg.Columns, "|"), "run|deployment|model|gpu|tp|replicas|router|policy|latency|kv_blocks|tool|seed"; got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
	cell := func(row int, col string) string {
		for i, c := range cfg.Columns {
			if c == col {
				return cfg.Rows[row][i].String()
			}
		}
		t.Fatalf("no column %s", col)
		return ""
	}
	for _, tc := range []struct {
		row            int
		router, policy string
	}{
		{0, "round-robin", "-"},
		{1, "policy prefix-load: starlark prefix-load.star", "prefix-load generation 2: admission queue-limit; routing starlark prefix-load.star"},
	} {
		if r, p := cell(tc.row, "router"), cell(tc.row, "policy"); r != tc.router || p != tc.policy {
			t.Errorf("row %d: router %q policy %q, want %q and %q", tc.row, r, p, tc.router, tc.policy)
		}
	}

	// Without a bundle the table keeps its columns.
	rep, err = Build([]string{plain}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Tables[0].Columns {
		if c == "policy" {
			t.Errorf("a policy column without a policy")
		}
	}
}

// TestMeasuredRunHasNoSimVsRecorded: blis-load's results carry their own
// measurements in recorded_* (so that a replay of them compares against
// the real run); the report of such a table does not compare it with
// itself (issue 32, item 3: blis-report --compare real.arrow sim.arrow
// showed a "Simulated vs recorded" table of real.arrow at 0.00%).
func TestMeasuredRunHasNoSimVsRecorded(t *testing.T) {
	dir := t.TempDir()
	measured, simulated := filepath.Join(dir, "real.arrows"), filepath.Join(dir, "sim.arrows")
	seed := uint64(42)
	writeResultsMeta(t, measured, smallRows(), trace.NewMeta().With(trace.Stage{Tool: "blis-load", Version: trace.Version, Seed: &seed}))
	writeResultsMeta(t, simulated, smallRows(), simMeta("roofline:qwen3-32b/h100/tp2"))
	rep, err := Build([]string{measured, simulated}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var simReal *Table
	for _, tb := range rep.Tables {
		if tb.Name == "sim_vs_real" {
			simReal = tb
		}
	}
	if simReal == nil {
		t.Fatal("no sim_vs_real table for the simulated run")
	}
	for _, row := range simReal.Rows {
		if run := row[0].String(); run != "sim.arrows" {
			t.Errorf("sim_vs_real has a row of %s, a measured run", run)
		}
	}
}
