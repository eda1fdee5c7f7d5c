package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
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
	// docs/latency.md: roofline, Hopper, closed loop C 8–32: 149 points, TTFT 13% (+7%), TPOT 4% (-1%);
	// its five regimes (three closed-loop, two open-loop) come first.
	if got, want := row(known, 0), "small.results.arrows|qwen3-32b|roofline:qwen3-32b/h100/tp2|Hopper|closed loop, C 8–32|149|13|7|4|-1"; got != want {
		t.Errorf("known error row 0:\n got %s\nwant %s", got, want)
	}
	if got, want := row(known, 5), "small_ref.results.arrows|qwen3-32b|fitted:coefficients/qwen3-32b/h100-tp2-vllm-0.12.0.yaml|Hopper|closed loop, C 8–32|28|8|5|4|-1"; got != want {
		t.Errorf("known error row 5:\n got %s\nwant %s", got, want)
	}

	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	h := page.String()
	if i, j := strings.Index(h, "<h2>Run configuration</h2>"), strings.Index(h, "<h2>Latency distributions</h2>"); i < 0 || j < 0 || i > j {
		t.Errorf("the HTML does not start with the configuration (at %d, charts at %d)", i, j)
	}
	if li := h[strings.Index(h, "<ul>"):strings.Index(h, "</ul>")]; strings.Count(li, "small.results.arrows") != 1 {
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
