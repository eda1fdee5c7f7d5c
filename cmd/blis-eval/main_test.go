package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/internal/cliutil"
)

const evolve = "../../examples/evolve/"

func runEval(t *testing.T, args ...string) (int, map[string]any, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := app()
	a.Writer = &out
	code := cliutil.RunArgs(a, append([]string{"blis-eval"}, args...), &errb)
	var m map[string]any
	if code == 0 {
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
		}
	}
	return code, m, errb.String()
}

func candidate(t *testing.T, router string) string {
	t.Helper()
	base, err := os.ReadFile(evolve + "cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, append(base, []byte(router)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEval(t *testing.T) {
	good := candidate(t, "router: {routing: least-loaded}\n")
	code, m, stderr := runEval(t, "--cluster", good, "--fitness", evolve+"fitness.yaml", "--workload", evolve+"workload.yaml",
		"--seeds", "3", "--artifacts", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if m["valid"] != true || m["primary"] == nil {
		t.Fatalf("want a valid candidate with a primary: %v", m)
	}
	ci := m["ci95"].(map[string]any)["goodput"].([]any)
	mean := m["metrics"].(map[string]any)["goodput"].(float64)
	if lo, hi := ci[0].(float64), ci[1].(float64); !(lo <= mean && mean <= hi && lo < hi) {
		t.Fatalf("goodput %v outside its CI %v (three workload seeds differ)", mean, ci)
	}
	if len(m["seeds"].([]any)) != 3 {
		t.Fatalf("seeds %v", m["seeds"])
	}
	for _, k := range []string{"results", "decisions", "anomalies", "summary"} {
		if _, err := os.Stat(m["artifacts"].(map[string]any)[k].(string)); err != nil {
			t.Fatalf("artifact %s: %v", k, err)
		}
	}
	if s := m["summary"].(string); !strings.Contains(s, "## Outcome vs targets") {
		t.Fatalf("summary: %s", s)
	}

	// An invalid candidate is an answer: valid false, exit 0.
	bad := candidate(t, "router: {routing: no-such}\n")
	code, m, stderr = runEval(t, "--cluster", bad, "--fitness", evolve+"fitness.yaml", "--workload", evolve+"workload.yaml", "--artifacts", t.TempDir())
	if code != 0 || m["valid"] != false || !strings.Contains(m["error"].(string), "no-such") {
		t.Fatalf("invalid candidate: exit %d %v %s", code, m, stderr)
	}
	// A policy bundle that does not load is the candidate's failure too.
	code, m, stderr = runEval(t, "--cluster", evolve+"cluster.yaml", "--policy", "no-such-bundle.yaml", "--fitness", evolve+"fitness.yaml", "--workload", evolve+"workload.yaml", "--artifacts", t.TempDir())
	if code != 0 || m["valid"] != false || !strings.Contains(m["error"].(string), "no-such-bundle.yaml") {
		t.Fatalf("missing bundle: exit %d %v %s", code, m, stderr)
	}
	// A Starlark routing policy (a bundle naming it) is evaluated.
	bdir := t.TempDir()
	bpath := filepath.Join(bdir, "b.yaml")
	abs, _ := filepath.Abs(evolve + "candidates/good.star")
	os.WriteFile(bpath, []byte("id: t\nrouting: {kind: starlark, file: "+abs+"}\n"), 0o644)
	code, m, stderr = runEval(t, "--cluster", evolve+"cluster.yaml", "--policy", bpath, "--fitness", evolve+"fitness.yaml", "--workload", evolve+"workload.yaml", "--artifacts", t.TempDir())
	if code != 0 || m["valid"] != true {
		t.Fatalf("Starlark bundle: exit %d %v %s", code, m, stderr)
	}
	// A violated constraint too.
	strict := filepath.Join(t.TempDir(), "f.yaml")
	os.WriteFile(strict, []byte("objectives: [{metric: throughput, direction: maximize}]\nconstraints: [\"ttft_p99 < 0.001\"]\n"), 0o644)
	code, m, _ = runEval(t, "--cluster", good, "--fitness", strict, "--workload", evolve+"workload.yaml", "--artifacts", t.TempDir())
	if code != 0 || m["valid"] != false || !strings.Contains(m["error"].(string), "ttft_p99 < 0.001") {
		t.Fatalf("constraint failure: exit %d %v", code, m)
	}
}

// GPU-hours and cost are fitness metrics: a static cluster's from its
// replicas over the span, an autoscaled one's from the scale events
// blis-eval writes beside the results.
func TestEvalCost(t *testing.T) {
	dir := t.TempDir()
	fit := filepath.Join(dir, "f.yaml")
	os.WriteFile(fit, []byte("objectives: [{metric: cost_usd, direction: minimize, scale: 1}, {metric: throughput, direction: maximize}]\n"), 0o644)
	auto := filepath.Join(dir, "auto.yaml")
	os.WriteFile(auto, []byte(`deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    gpu_hour_usd: 2.5
    pools:
      - {role: monolithic, replicas: 1, min_replicas: 1, max_replicas: 4,
         autoscaler: {policy: hpa, interval: 5s, metric: queue_depth, target: 2, provisioning: {dist: constant, value: 10s}}}
seed: 1
`), 0o644)
	static := filepath.Join(dir, "static.yaml")
	os.WriteFile(static, []byte("deployments: [{id: d, model: llama-3.1-8b, gpu: h100, gpu_hour_usd: 2.5, pools: [{role: monolithic, replicas: 4}]}]\nseed: 1\n"), 0o644)
	for _, c := range []string{static, auto} {
		code, m, stderr := runEval(t, "--cluster", c, "--fitness", fit, "--workload", evolve+"workload.yaml", "--artifacts", t.TempDir())
		if code != 0 || m["valid"] != true {
			t.Fatalf("%s: exit %d %v %s", c, code, m, stderr)
		}
		ms := m["metrics"].(map[string]any)
		h, cost := ms["gpu_hours"].(float64), ms["cost_usd"].(float64)
		if !(h > 0) || math.Abs(cost-2.5*h) > 1e-9*cost {
			t.Fatalf("%s: gpu_hours %v, cost_usd %v: want cost = 2.5 × GPU-hours > 0", c, h, cost)
		}
		_, hasScale := m["artifacts"].(map[string]any)["scale_events"]
		if hasScale != (c == auto) {
			t.Fatalf("%s: scale_events artifact %v", c, m["artifacts"])
		}
		if c == static {
			// 4 GPUs over the span the throughput is measured on (the
			// workload has 400 llm requests).
			span := 400 * ms["completed_fraction"].(float64) / ms["throughput"].(float64)
			if want := 4 * span / 3600; math.Abs(h-want) > 1e-9*want {
				t.Fatalf("static: %v GPU-hours, want 4 GPUs × %.3f s = %v", h, span, want)
			}
		}
	}
}

// Bad usage of blis-eval itself exits 2 with a clear message.
func TestEvalUsage(t *testing.T) {
	good := candidate(t, "router: {routing: least-loaded}\n")
	zero := filepath.Join(t.TempDir(), "zero.yaml")
	os.WriteFile(zero, []byte("objectives: [{metric: throughput, direction: maximize, weight: 0}]\n"), 0o644)
	unknown := filepath.Join(t.TempDir(), "unknown.yaml")
	os.WriteFile(unknown, []byte("objectives: [{metric: thruput, direction: maximize}]\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster", good, "--fitness", evolve + "fitness.yaml"}, "expected a requests table, or --workload"},
		{[]string{"--cluster", good, "--fitness", zero, "--workload", evolve + "workload.yaml"}, "every weight is 0"},
		{[]string{"--cluster", good, "--fitness", unknown, "--workload", evolve + "workload.yaml"}, `unknown metric "thruput"`},
		{[]string{"--cluster", good, "--fitness", evolve + "fitness.yaml", "--seeds", "0", "--workload", evolve + "workload.yaml"}, "--seeds"},
		{[]string{"--cluster", good, "--fitness", evolve + "fitness.yaml", "nope.arrow"}, "nope.arrow"},
	} {
		code, _, stderr := runEval(t, append([]string{"--artifacts", t.TempDir()}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// Bad usage is one line on stderr, exit 2 and nothing on stdout, the JSON
// channel (issue 32, item 8: no arguments, or a requests table alone,
// exited 1 with the whole help on stdout).
func TestEvalUsageKeepsStdoutClean(t *testing.T) {
	for _, args := range [][]string{nil, {"requests.arrow"}, {"--cluster", "c.yaml", "requests.arrow"}, {"--bogus", "x"}} {
		var out, errb bytes.Buffer
		a := app()
		a.Writer = &out
		code := cliutil.RunArgs(a, append([]string{"blis-eval"}, args...), &errb)
		if code != 2 || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing, one line", args, code, out.String(), errb.String())
		}
	}
}

// Without --artifacts nothing is left in the temporary directory, whether
// the candidate is valid, invalid or blis-eval's usage is bad; with it the
// tables are kept (issue 32, item 13: each call left a ~21 MB blis-eval-N
// directory, a failed one an empty one).
func TestEvalLeavesNoTemporaries(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	good := candidate(t, "router: {routing: least-loaded}\n")
	bad := candidate(t, "router: {routing: no-such}\n")
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		valid bool
	}{
		{"valid", []string{"--cluster", good, "--workload", evolve + "workload.yaml"}, 0, true},
		{"invalid candidate", []string{"--cluster", bad, "--workload", evolve + "workload.yaml"}, 0, false},
		{"an unreadable requests table", []string{"--cluster", good, "nope.arrow"}, 2, false},
	} {
		code, m, stderr := runEval(t, append([]string{"--fitness", evolve + "fitness.yaml"}, tc.args...)...)
		if code != tc.code || code == 0 && m["valid"] != tc.valid {
			t.Fatalf("%s: exit %d, %v, %s", tc.name, code, m, stderr)
		}
		if code == 0 && len(m["artifacts"].(map[string]any)) != 0 {
			t.Errorf("%s: artifacts %v name files that are not kept", tc.name, m["artifacts"])
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Fatalf("%s: left %s in the temporary directory", tc.name, left[0].Name())
		}
	}
	keep := filepath.Join(t.TempDir(), "a")
	code, m, stderr := runEval(t, "--cluster", good, "--fitness", evolve+"fitness.yaml", "--workload", evolve+"workload.yaml", "--artifacts", keep)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if p, _ := m["artifacts"].(map[string]any)["results"].(string); filepath.Dir(p) != keep {
		t.Fatalf("artifacts %v, want them in %s", m["artifacts"], keep)
	} else if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}

// The Python examples (OpenEvolve evaluator, GEPA adapter) against fixed
// candidates, with plain python3 and the blis-eval of this tree.
func TestPythonExamples(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	bin := filepath.Join(t.TempDir(), "blis-eval")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tmp := t.TempDir()
	cmd := exec.Command(py, evolve+"test_evolve.py")
	cmd.Env = append(os.Environ(), "BLIS_EVAL="+bin, "TMPDIR="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 test_evolve.py: %v\n%s", err, out)
	}
	// Every evaluation cleaned up after itself (issue 32, item 13).
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		if strings.HasPrefix(e.Name(), "blis-eval-") || strings.HasPrefix(e.Name(), "blis-evolve-") || strings.HasPrefix(e.Name(), "blis-gepa-") {
			t.Errorf("the examples left %s in the temporary directory", e.Name())
		}
	}
}

// TestBudgets: a legal but runaway candidate (examples/evolve/candidates/
// runaway.star: about 850,000 Starlark steps a call, 10 s of evaluation)
// is stopped by --timeout — valid: false with the reason, exit 0, soon
// after the limit — and by --max-run-steps; a normal candidate passes
// both.
func TestBudgets(t *testing.T) {
	dir := t.TempDir()
	bundle := func(star string) string {
		p := filepath.Join(dir, star+".bundle.yaml")
		abs, _ := filepath.Abs(evolve + "candidates/" + star)
		os.WriteFile(p, []byte("id: "+star+"\nrouting: {kind: starlark, file: "+abs+"}\n"), 0o644)
		return p
	}
	args := func(star string, extra ...string) []string {
		return append([]string{"--cluster", evolve + "cluster.yaml", "--policy", bundle(star), "--fitness", evolve + "fitness.yaml",
			"--workload", evolve + "workload.yaml", "--artifacts", t.TempDir()}, extra...)
	}
	const limit = time.Second
	start := time.Now()
	code, m, stderr := runEval(t, args("runaway.star", "--timeout", limit.String())...)
	took := time.Since(start)
	if code != 0 || m["valid"] != false || !strings.Contains(m["error"].(string), "timeout: the evaluation ran past --timeout 1s") {
		t.Fatalf("--timeout: exit %d, %v, %s", code, m, stderr)
	}
	// Within a second of the limit on an idle machine (docs/evaluator.md);
	// a loaded test machine gets slack.
	if took > limit+5*time.Second {
		t.Fatalf("--timeout 1s returned after %s", took)
	}
	code, m, stderr = runEval(t, args("runaway.star", "--max-run-steps", "5000000")...)
	if code != 0 || m["valid"] != false || !strings.Contains(m["error"].(string), "whole-run step budget exceeded: more than 5000000 Starlark steps") {
		t.Fatalf("--max-run-steps: exit %d, %v, %s", code, m, stderr)
	}
	code, m, stderr = runEval(t, args("good.star", "--timeout", "60s", "--max-run-steps", "5000000")...)
	if code != 0 || m["valid"] != true {
		t.Fatalf("a normal candidate within both budgets: exit %d, %v, %s", code, m, stderr)
	}
	if code, _, stderr = runEval(t, args("good.star", "--timeout", "soon")...); code != 2 || !strings.Contains(stderr, "--timeout: expected a positive duration") {
		t.Fatalf("a bad --timeout: exit %d, %s", code, stderr)
	}
}
