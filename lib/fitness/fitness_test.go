package fitness

import (
	"math"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"", "empty fitness spec"},
		{"objectives: []", "at least one objective"},
		{"objectives: [{metric: thruput, direction: maximize}]", `unknown metric "thruput"`},
		{"objectives: [{metric: throughput}]", "objectives[0].direction: expected maximize or minimize"},
		{"objectives: [{metric: throughput, direction: up}]", `found "up"`},
		{"objectives: [{metric: throughput, direction: max, weight: 0}, {metric: ttft_p99, direction: min, weight: 0}]", "every weight is 0"},
		{"objectives: [{metric: throughput, direction: max, weight: -1}]", "weight: expected a number >= 0"},
		{"objectives: [{metric: throughput, direction: max, scale: 0}]", "scale: expected a number > 0"},
		{"objectives: [{metric: goodput, direction: max}]", "goodput needs SLO targets"},
		{"objectives: [{metric: ttft_p99.tier:gold, direction: min}]", `unknown scope "tier"`},
		{"objectives: [{metric: jain_fairness.interactive, direction: max}]", "takes no scope"},
		{"objectives: [{metric: throughput, direction: max}]\nconstraints: [\"slo_attainment.interactive >= 0.95\"]", "slo_attainment needs SLO targets"},
		{"objectives: [{metric: throughput, direction: max}]\nconstraints: [\"ttft_p99 = 3\"]", "expected METRIC >= NUMBER"},
		{"objectives: [{metric: throughput, direction: max}]\nconstraints: [\"ttft_p99 <= fast\"]", `expected a number after <=, found "fast"`},
		{"objectives: [{metric: throughput, direction: max}]\nslo: [\"interactive:ttft=fast\"]", "slo:"},
		{"objectivs: []", "objectivs"},
		{"objectives: [{metric: anomalies.storm, direction: min}]", `unknown anomaly type "storm": expected one of priority_inversion`},
		{"objectives: [{metric: cache_hit_rate_cpu.interactive, direction: max}]", "cache_hit_rate_cpu is the whole run's and takes no scope"},
		{"objectives: [{metric: scale_ups.tenant:a, direction: min}]", "takes no scope"},
		{"objectives: [{metric: cache_hit_rate_CPU, direction: max}]", `unknown metric "cache_hit_rate_CPU"`},
	} {
		_, err := Parse([]byte(tc.spec))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}

const spec = `
name: t
slo: ["interactive:ttft=200ms"]
objectives:
  - {metric: throughput, direction: maximize, weight: 3, scale: 10}
  - {metric: ttft_p99.interactive, direction: minimize, weight: 1, scale: 100}
constraints:
  - "slo_attainment.interactive >= 0.95"
`

// The primary by hand: (3·(20/10) + 1·(−50/100)) / 4 = (6 − 0.5) / 4 = 1.375.
func TestScoreByHand(t *testing.T) {
	s, err := Parse([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	r := s.Score(Metrics{"throughput": 20, "ttft_p99.interactive": 50, "slo_attainment.interactive": 0.97})
	if !r.Feasible || math.Abs(float64(r.Primary)-1.375) > 1e-12 {
		t.Fatalf("%+v, want feasible with primary 1.375", r)
	}
	r = s.Score(Metrics{"throughput": 20, "ttft_p99.interactive": 50, "slo_attainment.interactive": 0.9})
	if r.Feasible || len(r.Violations) != 1 || !strings.Contains(r.Violations[0], "slo_attainment.interactive >= 0.95 (found 0.9)") {
		t.Fatalf("%+v, want the constraint violated", r)
	}
	r = s.Score(Metrics{"throughput": 20, "ttft_p99.interactive": math.NaN(), "slo_attainment.interactive": 1})
	if r.Feasible {
		t.Fatal("an undefined objective must make the run infeasible")
	}
}

func TestParetoRanks(t *testing.T) {
	mk := func(run string, feasible bool, a, b float64) Result {
		return Result{Run: run, Feasible: feasible, Primary: Float(a + b), Objectives: []Value{{Normalised: Float(a)}, {Normalised: Float(b)}}}
	}
	rs := []Result{
		mk("a", true, 1, 1), // dominated by b
		mk("b", true, 2, 2), // front
		mk("c", true, 3, 0), // front
		mk("d", true, 0, 0), // dominated by a: rank 3
		mk("e", false, 9, 9),
	}
	Rank(rs)
	want := map[string]int{"a": 2, "b": 1, "c": 1, "d": 3, "e": 4}
	for _, r := range rs {
		if r.Rank != want[r.Run] || r.Front != (want[r.Run] == 1) {
			t.Errorf("%s: rank %d front %v, want %d", r.Run, r.Rank, r.Front, want[r.Run])
		}
	}
	order := Order(rs)
	if got := rs[order[0]].Run + rs[order[1]].Run; got != "bc" {
		t.Errorf("order starts %s, want b (primary 4) then c (3)", got)
	}
	if _, err := Evaluate(nil, nil, nil, Side{}); err == nil || !strings.Contains(err.Error(), "no runs") {
		t.Errorf("empty run set: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(spec))
	f.Add([]byte("objectives: [{metric: e2e_p50.tenant:a, direction: min}]\nconstraints: [\"ttft_p99 < 1\"]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil && len(s.Objectives) == 0 {
			t.Fatal("a spec without objectives parsed")
		}
	})
}

// Errors name the line and the key, never a Go type (issue 10, item 10).
func TestParseErrorsNameLineAndKey(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"name: x\nobjectivs: []\n", "fitness spec:2: objectivs: unknown key; did you mean objectives?"},
		{"objectives:\n  - {metric: goodputt, direction: max}\n", `fitness spec:2: objectives[0].metric: unknown metric "goodputt"`},
		{"objectives:\n  - {metric: throughput, direction: max, weight: many}\n", "fitness spec:2: objectives[0].weight: expected a number"},
		{"objectives:\n  - {metric: throughput, direction: max}\nconstraints:\n  - \"ttft_p99 = 3\"\n", "fitness spec:4: constraints[0]:"},
	} {
		_, err := Parse([]byte(tc.spec))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "rawSpec") {
			t.Errorf("%q: error %v, want %q", tc.spec, err, tc.want)
		}
	}
}
