package sweep

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // pathString of the result, or "error: ..." substring
	}{
		{"replicas", "replicas"},
		{"router.routing", "router.routing"},
		{"deployments[0].pools[1].replicas", "deployments[0].pools[1].replicas"},
		{"workload.clients[2].rate_fraction", "workload.clients[2].rate_fraction"},
		{"a[1][2].b", "a[1][2].b"},
		{"", "error: empty key"},
		{"a..b", "error: empty name"},
		{"a.", "error: ends with a dot"},
		{"a[x]", "error: expected a non-negative integer"},
		{"a[-1]", "error: expected a non-negative integer"},
		{"a[1", "error: [ without ]"},
		{"a b", "error: unexpected"},
		{"[0]", "error: empty name"},
		{"a[0]b", "error: unexpected"},
	} {
		p, err := parsePath(tc.in)
		if strings.HasPrefix(tc.want, "error: ") {
			if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(tc.want, "error: ")) {
				t.Errorf("parsePath(%q) = %v, %v; want error containing %q", tc.in, p, err, tc.want)
			}
			continue
		}
		if err != nil || pathString(p) != tc.want {
			t.Errorf("parsePath(%q) = %q, %v; want %q", tc.in, pathString(p), err, tc.want)
		}
	}
}

const traceWL = "workload: {trace: ../../../testdata/azure2023_code.csv}\n"

func parseSpec(t *testing.T, body string) (*Spec, error) {
	t.Helper()
	return Parse([]byte(body), "sweep.yaml", "testdata")
}

// Bad input gets an error naming the file, the line, the key and what was
// expected, before anything runs.
func TestSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"unknown cluster key", traceWL + "axes:\n  router.routng: [round-robin]\n",
			[]string{"sweep.yaml:3:", "router.routng", "unknown key routng in router (did you mean routing?)", "valid keys: admission, admission_params, flow_control, priority, queue_limit, routing, weights"}},
		{"unknown top cluster key", traceWL + "axes:\n  replica: [1, 2]\n",
			[]string{"sweep.yaml:3:", "unknown key replica in the cluster config", "replicas"}},
		{"unknown workload key", traceWL + "axes:\n  workload.speedpu: [1, 2]\n",
			[]string{"sweep.yaml:3:", "unknown key speedpu in the workload (did you mean speedup?)"}},
		{"empty axis", traceWL + "axes:\n  replicas: []\n",
			[]string{"sweep.yaml:3:", "axes: replicas: empty list"}},
		{"empty range", traceWL + "axes:\n  replicas: {from: 8, to: 2}\n",
			[]string{"sweep.yaml:3:", "empty range: from 8 is above to 2"}},
		{"bad value", traceWL + "axes:\n  router.routing: [round-robin, fastest]\n",
			[]string{"sweep.yaml:3:", "value fastest", "fastest"}},
		{"bad replica count", traceWL + "axes:\n  replicas: [0, 2]\n",
			[]string{"sweep.yaml:3:", "value 0", "replicas: expected >= 1"}},
		{"no axes", traceWL, []string{"axes: missing"}},
		{"empty axes", traceWL + "axes: {}\n", []string{"axes: empty"}},
		{"no workload", "axes: {replicas: [1]}\n", []string{"workload: missing"}},
		{"unknown top key", traceWL + "axis: {replicas: [1]}\n", []string{"sweep.yaml:2:", "unknown key axis in the sweep spec", "axes"}},
		{"index past the end", "cluster: {}\n" + traceWL + "axes:\n  workload.clients[0].rate: [1]\n",
			[]string{"unknown key clients in the workload"}},
		{"deployment index past the end", "cluster: {deployments: [{id: a, model: llama-3.1-8b, gpu: h100, pools: [{replicas: 1}]}]}\n" + traceWL + "axes:\n  deployments[1].pools[0].replicas: [1]\n",
			[]string{"sweep.yaml:4:", "deployments[1]: the base file's deployments has 1 element(s) (indices 0..0)"}},
		{"deployments of a flat file", traceWL + "axes:\n  deployments[0].pools[0].replicas: [1]\n",
			[]string{"deployments[0]: the base file has no deployments list to index"}},
		{"pool key typo", "cluster: {deployments: [{id: a, model: llama-3.1-8b, gpu: h100, pools: [{replicas: 1}]}]}\n" + traceWL + "axes:\n  deployments[0].pools[0].replica: [1]\n",
			[]string{"unknown key replica in deployments[0].pools[0] (did you mean replicas?)"}},
		{"index into a mapping", traceWL + "axes:\n  router[0]: [1]\n", []string{"router is a mapping, not a list"}},
		{"key of a scalar", traceWL + "axes:\n  replicas.x: [1]\n", []string{"replicas is a single value (an integer)"}},
		{"replications elsewhere", traceWL + "axes:\n  replicas: {replications: 3}\n", []string{"seed axis only"}},
		{"seed list empty", traceWL + "axes:\n  replicas: [1]\n  seed: []\n", []string{"seed: empty list"}},
		{"zero replications", traceWL + "axes:\n  replicas: [1]\n  seed: {replications: 0}\n", []string{"replications: expected 1.."}},
		{"whole workload", traceWL + "axes:\n  workload: [1]\n", []string{"name a key of the workload"}},
		{"steps and step", traceWL + "axes:\n  replicas: {from: 1, to: 4, step: 1, steps: 4}\n", []string{"give step or steps, not both"}},
		{"log from zero", traceWL + "axes:\n  workload.speedup: {from: 0, to: 4, steps: 3, scale: log}\n", []string{"scale log needs from > 0"}},
		{"sampling", traceWL + "sampling: {method: sobol}\naxes: {replicas: [1]}\n", []string{"expected grid, random or lhs"}},
		{"sampling points", traceWL + "sampling: {method: lhs}\naxes: {replicas: [1]}\n", []string{"points: expected 1.."}},
		{"bad slo", traceWL + "report: {slo: ttft=fast}\naxes: {replicas: [1]}\n", []string{"sweep.yaml:2: report:", "expected a positive duration"}},
		{"bad by", traceWL + "report: {by: colour}\naxes: {replicas: [1]}\n", []string{"by: expected one of"}},
		{"synth typo", "workload: {example: react}\naxes:\n  workload.aggregate_rat: [1, 2]\n", []string{"unknown key aggregate_rat in the workload", "aggregate_rate"}},
		{"synth bad value", "workload: {example: react}\naxes:\n  workload.aggregate_rate: [-1]\n", []string{"value -1"}},
		{"missing trace", "workload: {trace: nope.csv}\naxes: {replicas: [1]}\n", []string{"nope.csv"}},
		{"trace option typo", "workload: {trace: ../../../testdata/azure2023_code.csv, speedpu: 2}\naxes: {replicas: [1]}\n", []string{"speedpu", "valid keys"}},
		{"inline cluster typo", "cluster: {replica: 2}\n" + traceWL + "axes: {tp: [1]}\n", []string{"sweep.yaml:1: cluster:", "replica"}},
		{"continuous grid", traceWL + "axes:\n  workload.speedup: {from: 1, to: 2}\n", []string{}}, // parses; NewPlan refuses (below)
		{"not yaml", "axes: [\n", []string{"sweep.yaml"}},
		{"not a mapping", "- 1\n", []string{"expected a mapping"}},
		{"empty", "", []string{"empty sweep spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSpec(t, tc.body)
			if err == nil && len(tc.want) > 0 {
				_, err = NewPlan(s) // values are checked by the real parsers while planning
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestGridNeedsSteps(t *testing.T) {
	s, err := parseSpec(t, traceWL+"axes:\n  workload.speedup: {from: 1, to: 2}\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(s); err == nil || !strings.Contains(err.Error(), "needs steps") {
		t.Fatalf("NewPlan: %v, want a 'needs steps' error", err)
	}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		axis string
		want []string
	}{
		{"replicas: {from: 1, to: 4}", []string{"1", "2", "3", "4"}},
		{"replicas: {from: 2, to: 10, step: 4}", []string{"2", "6", "10"}},
		{"replicas: {from: 1, to: 64, steps: 7, scale: log}", []string{"1", "2", "4", "8", "16", "32", "64"}},
		{"replicas: {from: 1, to: 2, steps: 4}", []string{"1", "2"}}, // integers: rounded, repeats dropped
		{"workload.speedup: {from: 0.5, to: 2, steps: 4}", []string{"0.5", "1", "1.5", "2"}},
		{"workload.speedup: {from: 0.1, to: 0.3, step: 0.1}", []string{"0.1", "0.2", "0.3"}},
		{"workload.speedup: {from: 1, to: 3, steps: 3}", []string{"1", "2", "3"}},
		{"workload.speedup: [3, 1.5]", []string{"3", "1.5"}},
		{"router.weights: {load: 1, prefix: 2}", []string{"{load: 1, prefix: 2}"}},
		{"router.routing: least-loaded", []string{"least-loaded"}},
	} {
		s, err := parseSpec(t, traceWL+"axes:\n  "+tc.axis+"\n")
		if err != nil {
			t.Errorf("%s: %v", tc.axis, err)
			continue
		}
		var got []string
		for _, v := range s.Axes[0].Values {
			got = append(got, flowString(v))
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: values %q, want %q", tc.axis, got, tc.want)
		}
	}
}

func TestGridOrder(t *testing.T) {
	s, err := parseSpec(t, traceWL+"axes:\n  replicas: [1, 2]\n  router.routing: [round-robin, least-loaded, least-kv]\n  seed: {replications: 2, start: 7}\n")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Points) != 6 || len(p.Runs) != 12 {
		t.Fatalf("%d points, %d runs; want 6, 12", len(p.Points), len(p.Runs))
	}
	// The first axis varies slowest, seeds innermost.
	want := []string{"1 round-robin 7", "1 round-robin 8", "1 least-loaded 7"}
	for i, w := range want {
		r := p.Runs[i]
		got := flowString(r.Point.Values[0]) + " " + flowString(r.Point.Values[1]) + " " + strconv.FormatUint(r.Seed, 10)
		if got != w {
			t.Errorf("run %d: %q, want %q", i, got, w)
		}
	}
	ids := map[string]bool{}
	for _, r := range p.Runs {
		if ids[r.ID] {
			t.Errorf("run id %s repeats", r.ID)
		}
		ids[r.ID] = true
	}
	// The same spec plans the same ids (content addressing).
	p2, _ := NewPlan(s)
	for i := range p.Runs {
		if p.Runs[i].ID != p2.Runs[i].ID {
			t.Fatalf("run %d: id differs between two plans of one spec", i)
		}
	}
}

// A value that equals the default is the same run: ids address resolved
// inputs, not how they were written.
func TestIDsAddressResolvedInputs(t *testing.T) {
	a, err := parseSpec(t, traceWL+"axes:\n  router.routing: [round-robin]\n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseSpec(t, traceWL+"axes:\n  replicas: [1]\n")
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := NewPlan(a)
	pb, _ := NewPlan(b)
	if pa.Runs[0].ID != pb.Runs[0].ID {
		t.Fatalf("the defaults written out and left implicit give different ids")
	}
	c, _ := parseSpec(t, traceWL+"axes:\n  replicas: [2]\n")
	pc, _ := NewPlan(c)
	if pc.Runs[0].ID == pa.Runs[0].ID {
		t.Fatalf("2 replicas and 1 replica share an id")
	}
}

func TestSampling(t *testing.T) {
	body := traceWL + "sampling: {method: lhs, points: 10, seed: 3}\naxes:\n  workload.speedup: {from: 1, to: 2}\n  replicas: {from: 1, to: 10}\n"
	s, err := parseSpec(t, body)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Points)+p.Duplicates != 10 {
		t.Fatalf("%d points + %d duplicates, want 10", len(p.Points), p.Duplicates)
	}
	// Latin hypercube: each tenth of the speedup range holds one point.
	strata := map[int]bool{}
	for _, pt := range p.Points {
		var x float64
		if err := pt.Values[0].Decode(&x); err != nil {
			t.Fatal(err)
		}
		strata[int((x-1)*10)] = true
	}
	if len(strata) != len(p.Points) {
		t.Errorf("speedup strata %v: not one point per stratum", strata)
	}
	// Integers over 1..10 in 10 strata: every integer once.
	seen := map[string]bool{}
	for _, pt := range p.Points {
		seen[pt.Values[1].Value] = true
	}
	if len(seen) != 10 || p.Duplicates != 0 {
		t.Errorf("replicas values %v (duplicates %d): want each of 1..10 once", seen, p.Duplicates)
	}
	// Seeded: the same sample again; another seed, another sample.
	p2, _ := NewPlan(s)
	for i := range p.Points {
		if flowString(p.Points[i].Values[0]) != flowString(p2.Points[i].Values[0]) {
			t.Fatal("the same sampling seed gave another sample")
		}
	}
	s.Sampling.Seed = 4
	p3, _ := NewPlan(s)
	if flowString(p.Points[0].Values[0]) == flowString(p3.Points[0].Values[0]) {
		t.Error("another sampling seed gave the same first point")
	}

	r, err := parseSpec(t, traceWL+"sampling: {method: random, points: 50, seed: 1}\naxes:\n  router.routing: [round-robin, least-loaded]\n  replicas: {from: 1, to: 3}\n")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	// 2 x 3 distinct combinations: 50 draws repeat most of them.
	if len(pr.Points) != 6 || pr.Duplicates != 44 {
		t.Errorf("random: %d points, %d duplicates; want 6 and 44", len(pr.Points), pr.Duplicates)
	}
}

// Combinations that are each valid alone but not together are failed runs,
// reported with the parser's message, not a failed sweep.
func TestInvalidCombination(t *testing.T) {
	s, err := parseSpec(t, traceWL+"axes:\n  engine.max_num_seqs: [64, 512]\n  engine.max_num_batched_tokens: [256, 8192]\n")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	var invalid []string
	for _, r := range p.Runs {
		if r.Invalid != "" {
			invalid = append(invalid, r.Invalid)
		}
	}
	if len(invalid) != 1 || !strings.Contains(invalid[0], "max_num_batched_tokens (256) must be >= engine.max_num_seqs (512)") {
		t.Fatalf("invalid runs %q, want the one 512-seqs/256-tokens combination", invalid)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("workload: {trace: x.csv}\naxes: {replicas: [1, 2]}\n"))
	f.Add([]byte("workload: {example: react}\naxes:\n  workload.aggregate_rate: {from: 1, to: 9, steps: 3}\n  seed: {replications: 2}\n"))
	f.Add([]byte("cluster: {replicas: 2}\nworkload: {example: react}\nsampling: {method: lhs, points: 4}\naxes: {router.routing: [round-robin]}\n"))
	f.Add([]byte("axes: {deployments[0].pools[0].replicas: [1]}\nworkload: {example: react}\n"))
	f.Add([]byte("report: {slo: [\"ttft=1s\"], by: tenant}\ncost: {h100: 2}\naxes: {replicas: {from: 1, to: 4, step: 1}}\nworkload: {example: react}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b, "fuzz.yaml", "testdata")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if s.countRuns() > 1e5 {
			return
		}
		if _, err := NewPlan(s); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}
