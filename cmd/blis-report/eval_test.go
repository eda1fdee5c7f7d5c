package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/eval"
	"github.com/blis-sim/blis/lib/fitness"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const evolve = "../../examples/evolve/"

// evalRun simulates examples/evolve's workload with a router and returns
// the artifacts (results, decisions with regret, anomalies).
func evalRun(t *testing.T, router string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	base, _ := os.ReadFile(evolve + "cluster.yaml")
	cl := filepath.Join(dir, "c.yaml")
	os.WriteFile(cl, append(base, []byte(router)...), 0o644)
	spec, err := fitness.Load(evolve + "fitness.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := eval.Run(eval.Options{Cluster: cl, Fitness: spec, Workload: evolve + "workload.yaml", Seeds: 1,
		Artifacts: filepath.Join(dir, "art"), RegretSample: 0.05, Strategy: "issue_focused"})
	if err != nil {
		t.Fatal(err)
	}
	// Stable names: the summary names its tables by base name.
	return out.Artifacts
}

func runReport(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := app()
	a.Writer = &stdout
	o := filepath.Join(t.TempDir(), "out")
	code := cliutil.RunArgs(a, append([]string{"blis-report", "-o", o}, args...), &stderr)
	b, _ := os.ReadFile(o)
	return code, string(b), stderr.String()
}

// The summary is deterministic (byte-identical across runs), within its
// size budget, and matches the golden file; every strategy works.
func TestSummary(t *testing.T) {
	art := evalRun(t, "router: {routing: least-loaded}\n")
	args := []string{"--summary", "--fitness", evolve + "fitness.yaml", "--decisions", art["decisions"], "--anomalies", art["anomalies"], art["results"]}
	code, got, stderr := runReport(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	art2 := evalRun(t, "router: {routing: least-loaded}\n")
	_, again, _ := runReport(t, "--summary", "--fitness", evolve+"fitness.yaml", "--decisions", art2["decisions"], "--anomalies", art2["anomalies"], art2["results"])
	if got != again {
		t.Fatal("two identical runs gave different summaries")
	}
	// ~4 characters per token: 500–1,500 tokens.
	if n := len(got); n < 1500 || n > 6000 {
		t.Errorf("summary of %d bytes, want about 500–1,500 tokens:\n%s", n, got)
	}
	golden := filepath.Join("testdata", "summary.golden.md")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil || string(want) != got {
		t.Errorf("summary differs from %s (go test -update to rewrite):\n%s", golden, got)
	}
	for _, s := range []string{"decision_audit", "counterfactual", "pattern_mining"} {
		code, out, stderr := runReport(t, append([]string{"--summary-strategy", s}, args...)...)
		if code != 0 || !strings.Contains(out, "# Run summary ("+s+")") {
			t.Errorf("%s: exit %d %s\n%s", s, code, stderr, out)
		}
		if s == "pattern_mining" && !strings.Contains(out, "## Recurring patterns behind the worst decisions\n\nThe worst 40 of 400 routing decisions") {
			t.Errorf("pattern_mining:\n%s", out)
		}
	}
}

func TestParetoAndErrors(t *testing.T) {
	good := evalRun(t, "router: {routing: least-loaded}\n")["results"]
	bad := evalRun(t, "router: {routing: weighted, weights: {prefix: 1}}\n")["results"]
	html := filepath.Join(t.TempDir(), "p.html")
	code, out, stderr := runReport(t, "--format", "json", "--fitness", evolve+"fitness.yaml", "--pareto", "--html", html, good, bad)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rk fitness.Ranking
	if err := json.Unmarshal([]byte(out), &rk); err != nil {
		t.Fatal(err)
	}
	if len(rk.Runs) != 2 || rk.Runs[0].Run != good || rk.Runs[0].Rank != 1 || rk.Runs[1].Primary >= rk.Runs[0].Primary {
		t.Fatalf("want the least-loaded run first: %s", out)
	}
	b, _ := os.ReadFile(html)
	if !bytes.Contains(b, []byte(`id="fig-pareto"`)) {
		t.Fatal("no Pareto plot in the HTML")
	}
	// Axes named by metric, unit and direction; both runs labelled.
	for _, want := range []string{"goodput (requests/s): higher is better", "ttft_p99.interactive (ms): lower is better", filepath.Base(good)} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the Pareto page lacks %q", want)
		}
	}
	unknownClass := filepath.Join(t.TempDir(), "u.yaml")
	os.WriteFile(unknownClass, []byte("objectives: [{metric: ttft_p99.premium, direction: min}]\n"), 0o644)
	// Anomaly counts are objectives too, read from the run's anomalies table.
	anom := filepath.Join(t.TempDir(), "a.yaml")
	os.WriteFile(anom, []byte("objectives: [{metric: anomalies, direction: min}, {metric: rejection_rate, direction: min}]\nconstraints: [\"anomalies.preemption_storm <= 0\"]\n"), 0o644)
	art := evalRun(t, "router: {routing: least-loaded}\n")
	if code, out, stderr := runReport(t, "--format", "json", "--fitness", anom, "--anomalies", art["anomalies"], art["results"]); code != 0 || !strings.Contains(out, `"metric": "anomalies"`) {
		t.Fatalf("anomaly objectives: exit %d, %s %s", code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fitness", evolve + "fitness.yaml", "--pareto"}, "no runs to rank"},
		{[]string{"--fitness", unknownClass, good}, `no slo_class "premium": expected one of batch, interactive`},
		{[]string{"--pareto", good}, "give --fitness FILE"},
		{[]string{"--fitness", anom, good}, "anomalies: the anomaly counts come from the run's anomalies table"},
		{[]string{"--summary", good, bad}, "expected one results table"},
		{[]string{"--summary", "--summary-strategy", "vibes", good}, `--summary-strategy "vibes"`},
		{[]string{"--summary", "--decisions", good, good}, "expected a decisions table"},
	} {
		code, _, stderr := runReport(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// A decisions table written with --regret-sample on one replica has no
// regret rows: the summary says why instead of telling the user to pass
// the flag they passed (issue 32, item 2).
func TestSummaryRegretAskedButNone(t *testing.T) {
	dir := t.TempDir()
	cl := filepath.Join(dir, "one.yaml")
	os.WriteFile(cl, []byte("replicas: 1\nmodel: llama-3.1-8b\ngpu: h100\nseed: 1\n"), 0o644)
	spec, err := fitness.Load(evolve + "fitness.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := eval.Run(eval.Options{Cluster: cl, Fitness: spec, Workload: evolve + "workload.yaml", Seeds: 1,
		Artifacts: filepath.Join(dir, "art"), RegretSample: 0.5, Strategy: "issue_focused"})
	if err != nil {
		t.Fatal(err)
	}
	code, got, stderr := runReport(t, "--summary", "--decisions", out.Artifacts["decisions"], out.Artifacts["results"])
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(got, "No routing decision was replayed, although `decisions.arrow` was written with --regret-sample 0.5: regret compares a decision's replica with the other candidates, so it needs two or more replicas") ||
		strings.Contains(got, "run blis-sim with --decisions and --regret-sample") {
		t.Errorf("summary:\n%s", got)
	}
}
