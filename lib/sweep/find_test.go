package sweep

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestParseConstraints(t *testing.T) {
	for _, tc := range []struct {
		in     string
		metric string
		op     string
		value  float64
		err    string
	}{
		{in: "p99_ttft<=500ms", metric: "ttft_p99_ms", op: "<=", value: 500},
		{in: "mean_e2e < 2s", metric: "e2e_mean_ms", op: "<", value: 2000},
		{in: "p50_tpot<=800us", metric: "tpot_p50_ms", op: "<=", value: 0.8},
		{in: "ttft_p99_ms<=250", metric: "ttft_p99_ms", op: "<=", value: 250},
		{in: "attainment>=0.99", metric: "slo_all_met_pct", op: ">=", value: 99},
		{in: "attainment>=99.5%", metric: "slo_all_met_pct", op: ">=", value: 99.5},
		{in: "throughput>10", metric: "req_per_s", op: ">", value: 10},
		{in: "preempted_pct<=1", metric: "preempted_pct", op: "<=", value: 1},
		{in: "p99_ttf<=1s", err: "unknown metric"},
		{in: "p99_ttft=1s", err: "expected one of <=, <, >=, >"},
		{in: "p99_ttft<=fast", err: "expected a duration"},
		{in: "attainment>=99", err: "expected a fraction"},
		{in: "req_per_s>=5%", err: "a percentage applies to % metrics only"},
		{in: "p99_ttft<=", err: "missing value"},
		{in: "<=5", err: "expected metric<=value"},
	} {
		cs, err := ParseConstraints([]string{tc.in})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		c := cs[0]
		if c.Metric != tc.metric || c.Op != tc.op || math.Abs(c.Value-tc.value) > 1e-9 {
			t.Errorf("%q: %+v, want %s %s %g", tc.in, c, tc.metric, tc.op, tc.value)
		}
	}
	cs, err := ParseConstraints([]string{"p99_ttft<=500ms,p50_ttft<=100ms", "max_e2e<=30s"})
	if err != nil || len(cs) != 3 {
		t.Fatalf("%v, %v", cs, err)
	}
	if got := requestSLO(cs); got != "ttft=500ms,e2e=30s" {
		t.Errorf("requestSLO = %q, want the loosest bound per metric", got)
	}
}

// The check: the min-replicas search on the demo workload returns
// the answer of the exhaustive sweep of the same range, judged by the same
// rule (95% CI over three seeds), for each router.
func TestFindMinReplicasEqualsExhaustive(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates the demo trace many times")
	}
	body := "name: cap\nworkload: {trace: ../../../testdata/azure2023_code.csv, sample: 0.8}\n" +
		"axes:\n  replicas: {from: 1, to: 8}\n  router.routing: [round-robin, least-loaded]\n  seed: {replications: 3}\n"
	s, err := Parse([]byte(body), "cap.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := ParseConstraints([]string{"p99_ttft<=250ms,attainment>=0.99"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Find(s, FindOptions{Goal: MinReplicas, Constraints: cons, Confidence: 0.95, Exec: Options{Out: t.TempDir(), Workers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Answers) != 2 {
		t.Fatalf("%d answers, want one per router", len(res.Answers))
	}

	// The exhaustive sweep, in its own directory (no shared runs).
	s.Report.SLO = res.RequestSLO
	p := plan(t, s)
	out := t.TempDir()
	execute(t, p, Options{Out: out, Workers: 2})
	want := map[string]string{}
	byPoint := map[*Point][]*Record{}
	var order []*Point
	for _, r := range p.Runs {
		rec, err := readRecord(out, r.ID)
		if err != nil || rec == nil {
			t.Fatalf("record: %v", err)
		}
		if byPoint[r.Point] == nil {
			order = append(order, r.Point)
		}
		byPoint[r.Point] = append(byPoint[r.Point], rec)
	}
	for _, pt := range order {
		router := pt.Values[1].Value
		if _, done := want[router]; done {
			continue
		}
		if v := judge(cons, byPoint[pt], 0.95); v.Pass {
			want[router] = pt.Values[0].Value
		}
	}
	for _, a := range res.Answers {
		router := a.Combo[1].Value
		w, ok := want[router]
		if !ok {
			t.Fatalf("%s: the exhaustive sweep meets the SLO nowhere in 1..8", router)
		}
		if !a.Found || a.Value.Value != w {
			t.Errorf("%s: search answered %v (found %v, %s), exhaustive sweep %s", router, a.Value.Value, a.Found, a.Note, w)
		}
		// Bisection over 8 values: both ends, then at most 3 more.
		if a.Probes > 5 {
			t.Errorf("%s: %d probes for 8 values", router, a.Probes)
		}
		if n, _ := strconv.Atoi(w); n < 2 {
			t.Errorf("%s: answer %s: the test should need more than the bottom of the range", router, w)
		}
	}
}

// An SLO no replica count in the range meets gets a clear answer after two
// probes, not a loop.
func TestFindUnreachable(t *testing.T) {
	s, err := Parse([]byte("workload: {trace: ../../../testdata/azure2023_code.csv, limit: 400}\naxes:\n  replicas: {from: 1, to: 64}\n"), "u.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	cons, _ := ParseConstraints([]string{"p99_ttft<=1ms"})
	var lines []string
	res, err := Find(s, FindOptions{Goal: MinReplicas, Constraints: cons, Exec: Options{Out: t.TempDir()}, Log: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Answers[0]
	if a.Found || a.Probes != 2 || !strings.Contains(a.Note, "unreachable: even the largest value of the range misses the SLO (ttft_p99_ms = ") {
		t.Fatalf("answer %+v, want not found after 2 probes with the reason", a)
	}
	if a.Value.Value != "64" || len(lines) != 2 || !strings.Contains(lines[1], "replicas=64: misses") {
		t.Errorf("closest probe %s, log %q", a.Value.Value, lines)
	}

	// Met at the bottom of the range: said so.
	cons, _ = ParseConstraints([]string{"p99_ttft<=1h"})
	res, err = Find(s, FindOptions{Goal: MinReplicas, Constraints: cons, Exec: Options{Out: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Answers[0]; !a.Found || a.Value.Value != "1" || !strings.Contains(a.Note, "already meets the SLO") || strings.Contains(a.Note, "may be lower") {
		t.Errorf("answer %+v, want 1 with a note (the bottom of the range)", a)
	}

	// Attainment without any per-request target cannot be judged.
	cons, _ = ParseConstraints([]string{"attainment>=0.9"})
	if _, err := Find(s, FindOptions{Goal: MinReplicas, Constraints: cons, Exec: Options{Out: t.TempDir()}}); err == nil || !strings.Contains(err.Error(), "needs per-request targets") {
		t.Errorf("attainment alone: %v", err)
	}
	// No axis to search.
	if _, err := Find(s, FindOptions{Goal: MaxRate, Constraints: cons, Exec: Options{Out: t.TempDir()}}); err == nil || !strings.Contains(err.Error(), "needs a rate axis") {
		t.Errorf("max-rate without a rate axis: %v", err)
	}
}

// The highest sustainable rate of a synthetic workload on one replica:
// continuous bisection to the tolerance.
func TestFindMaxRate(t *testing.T) {
	body := `cluster: {replicas: 1}
workload:
  version: 1
  seed: 1
  horizon: 30s
  aggregate_rate: 1
  clients:
    - {name: c, input: {dist: uniform, min: 500, max: 1500}, output: {dist: uniform, min: 50, max: 150}}
axes:
  workload.aggregate_rate: {from: 1, to: 200}
`
	s, err := Parse([]byte(body), "r.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	cons, _ := ParseConstraints([]string{"p99_ttft<=200ms"})
	out := t.TempDir()
	res, err := Find(s, FindOptions{Goal: MaxRate, Constraints: cons, Tolerance: 0.05, Exec: Options{Out: out}})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Answers[0]
	rate, _ := strconv.ParseFloat(a.Value.Value, 64)
	if !a.Found || !a.Verdict.Pass || rate <= 1 || rate >= 200 {
		t.Fatalf("answer %+v", a)
	}
	// 200/1 at 5%: a dozen probes at most.
	if a.Probes > 14 {
		t.Errorf("%d probes", a.Probes)
	}
	// Just above the answer (beyond the tolerance) the SLO is missed.
	s.Axes[0].Range = nil
	s.Axes[0].Values = []*yaml.Node{(&Range{}).node(rate*1.06, false)}
	p := plan(t, s)
	execute(t, p, Options{Out: out})
	rec, _ := readRecord(out, p.Runs[0].ID)
	if v := judge(cons, []*Record{rec}, 0); v.Pass {
		t.Errorf("rate %g (6%% above the answer %g) still meets the SLO: %+v", rate*1.06, rate, v)
	}
}

// The cheapest answer: by cost with prices, else by GPUs; not-found
// answers never win.
func TestCheapest(t *testing.T) {
	res := &FindResult{Answers: []*Answer{
		{Found: false, GPUs: 1, Cost: 1},
		{Found: true, GPUs: 5, Cost: 16.49},
		{Found: true, GPUs: 4, Cost: 17.5},
		{Found: true, GPUs: 9, Cost: 16.0},
	}}
	if i := res.Cheapest(); i != 3 {
		t.Errorf("cheapest by cost: %d, want 3", i)
	}
	for _, a := range res.Answers {
		a.Cost = math.NaN()
	}
	if i := res.Cheapest(); i != 2 {
		t.Errorf("cheapest by GPUs: %d, want 2", i)
	}
	res.Answers = res.Answers[:1]
	if i := res.Cheapest(); i != -1 {
		t.Errorf("nothing found: %d, want -1", i)
	}
}
