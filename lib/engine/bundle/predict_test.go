package bundle_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/rng"
)

// sjf is a shortest-job-first scheduler on request.output_tokens (the
// unknown last).
const sjf = `
def key(r):
    if r.output_tokens == None:
        return 1 << 30
    return r.output_tokens

def schedule(queue, replica):
    return [r.id for r in sorted(queue, key=key)]
`

// twoClasses is a queueing workload of short chat answers (lognormal,
// median 60 tokens) and long reports (median 900), half each, on one
// replica that runs 4 sequences at a time, at about 90 % load: the
// waiting order decides E2E.
func twoClasses(n int) []row.Request {
	g := rng.New(11, "test-sjf")
	reqs := make([]row.Request, n)
	t := 0.0
	for i := range reqs {
		t += g.ExpFloat64() / 1.8
		r := row.NewRequest(fmt.Sprint("q", i))
		r.ArrivalUS, r.InputTokens = int64(t*1e6), int32(100+g.IntN(200))
		med, class := 60.0, "chat"
		if g.IntN(2) == 0 {
			med, class = 900, "report"
		}
		r.SLOClass = class
		r.OutputTokens = int32(max(2, math.Round(med*math.Exp(0.4*g.NormFloat64()))))
		reqs[i] = r
	}
	return reqs
}

func meanE2E(rs []row.Result) float64 {
	s, n := 0.0, 0
	for _, r := range rs {
		if r.Status == row.StatusCompleted {
			s += float64(r.E2EUS)
			n++
		}
	}
	return s / float64(n) / 1e6
}

// TestSJFPredictedVsOracle: without oracle: true, a Starlark scheduler
// reading request.output_tokens gets the predictor's value (None with no
// predictor, so SJF degenerates to FCFS); shortest-job-first on the true
// lengths beats SJF on predictions, which beats FCFS.
func TestSJFPredictedVsOracle(t *testing.T) {
	reqs := twoClasses(1500)
	cfg := testCluster(1)
	cfg.Engine.MaxNumSeqs = 4
	cfg.Engine.MaxNumBatchedTokens = 2048
	e2e := map[string]float64{}
	for name, head := range map[string]string{
		"fcfs":              "",
		"sjf, no predictor": "scheduler: {kind: starlark, file: s.star}\n",
		"sjf, oracle":       "oracle: true\nscheduler: {kind: starlark, file: s.star}\n",
		"sjf, class":        "predictor: {kind: class}\nscheduler: {kind: starlark, file: s.star}\n",
		"sjf, noisy 1.0":    "predictor: {kind: noisy, error: 1.0}\nscheduler: {kind: starlark, file: s.star}\n",
	} {
		path := ""
		if head != "" {
			path = writeBundle(t, map[string]string{"b.yaml": head, "s.star": sjf})
		}
		rs, _, err := simulate(t, cfg, path, reqs)
		if err != nil {
			t.Fatal(err)
		}
		e2e[name] = meanE2E(rs)
	}
	t.Logf("mean E2E (s): %v", e2e)
	fcfs, none, oracle, class, noisy := e2e["fcfs"], e2e["sjf, no predictor"], e2e["sjf, oracle"], e2e["sjf, class"], e2e["sjf, noisy 1.0"]
	if none != fcfs {
		t.Errorf("SJF with no predictor sees None for every request and must order as FCFS: %.3f s vs %.3f s", none, fcfs)
	}
	if !(oracle < class && class < fcfs) || !(oracle < noisy && noisy < fcfs) {
		t.Errorf("want oracle < predicted < fcfs: oracle %.3f, class %.3f, noisy %.3f, fcfs %.3f s", oracle, class, noisy, fcfs)
	}
	// A plausible margin: the predictions keep part of the oracle's gain,
	// not all of it, and not next to none.
	for name, v := range map[string]float64{"class": class, "noisy": noisy} {
		if kept := (fcfs - v) / (fcfs - oracle); kept < 0.2 || kept > 0.95 {
			t.Errorf("%s keeps %.0f%% of the oracle's gain over FCFS", name, 100*kept)
		}
	}
}

// TestOutputTokensNeedsPredictor: a tree may not read the output length a
// router cannot know; the bundle's oracle and predictor are in its
// provenance.
func TestOutputTokensNeedsPredictor(t *testing.T) {
	tree := "priority:\n  kind: decision_tree\n  tree: {if: \"request.output_tokens < 100\", then: {priority: 1}, else: {priority: 0}}\n"
	_, err := bundle.Load(writeBundle(t, map[string]string{"b.yaml": tree}), bundle.Env{})
	if err == nil || !strings.Contains(err.Error(), "b.yaml:3: priority.tree.if") || !strings.Contains(err.Error(), "request.output_tokens is unknown to a real router") {
		t.Fatalf("got %v", err)
	}
	for head, want := range map[string][2]string{
		"oracle: true\n":                         {"true", "none"},
		"predictor: {kind: noisy, error: 0.5}\n": {"false", "noisy error=0.5"},
		"predictor: {kind: class, prior: 200}\n": {"false", "class prior=200"},
	} {
		b, err := bundle.Load(writeBundle(t, map[string]string{"b.yaml": head + tree}), bundle.Env{})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, kv := range b.Provenance() {
			got[kv[0]] = kv[1]
		}
		if got[bundle.MetaOracle] != want[0] || got[bundle.MetaPredictor] != want[1] {
			t.Fatalf("%q: provenance %v", head, got)
		}
	}
	for yaml, want := range map[string]string{
		"predictor: {kind: noisy}\n":           "b.yaml:1: predictor: kind noisy needs error",
		"predictor: {kind: class, error: 1}\n": "b.yaml:1: predictor.error: only with kind: noisy",
		"predictor: {kind: psychic}\n":         `b.yaml:1: predictor.kind: expected none, class, noisy, found "psychic"`,
		"oracle: yes please\n":                 "b.yaml:1: oracle: expected true or false",
	} {
		if _, err := bundle.Load(writeBundle(t, map[string]string{"b.yaml": yaml}), bundle.Env{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: got %v, want %q", yaml, err, want)
		}
	}
}
