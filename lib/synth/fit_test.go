package synth

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"

	"github.com/blis-sim/blis/lib/convert"
	"github.com/blis-sim/blis/lib/trace"
)

// azureRows converts the whole Azure 2023 code trace (8,819 requests).
func azureRows(t *testing.T) []trace.Request {
	t.Helper()
	var buf bytes.Buffer
	if _, err := convert.Convert(convert.Options{Inputs: []string{filepath.Join("..", "..", "testdata", "azure2023_code.csv")}}, "-", nil, &buf); err != nil {
		t.Fatal(err)
	}
	src, err := trace.Open("-", &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rows, err := trace.ReadAllRequests(src)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// The spec fitted to the Azure code trace regenerates its statistics: rate
// and gap CV within 10%, length means within 10% and p50/p90 within 15%.
func TestFitRegeneratesTrace(t *testing.T) {
	rows := azureRows(t)
	y, err := FitSpec(rows, "azure2023_code.csv")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse([]byte(y), "fitted.yaml", ".")
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	table, want, got, err := FitComparison(rows, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%s", y, table)
	close := func(name string, a, b, tol float64) {
		if math.Abs(a-b) > tol*math.Abs(a) {
			t.Errorf("%s: trace %.3f, fitted %.3f (tolerance %.0f%%)", name, a, b, 100*tol)
		}
	}
	close("roots/s", want.Rate, got.Rate, 0.1)
	close("gap CV", want.GapCV, got.GapCV, 0.15)
	close("input mean", want.In.Mean, got.In.Mean, 0.1)
	close("output mean", want.Out.Mean, got.Out.Mean, 0.1)
	close("input p50", want.In.P50, got.In.P50, 0.15)
	close("input p90", want.In.P90, got.In.P90, 0.15)
	close("output p50", want.Out.P50, got.Out.P50, 0.15)
	close("output p90", want.Out.P90, got.Out.P90, 0.15)
	// The same trace fits to the same spec.
	y2, _ := FitSpec(rows, "azure2023_code.csv")
	if y2 != y {
		t.Fatal("fitting is not deterministic")
	}
}

// Sessions with accumulating context and shared prefixes are recovered
// from a synthesised table.
func TestFitSessionsAndPrefixes(t *testing.T) {
	s := parse(t, `version: 1
seed: 2
horizon: 600s
aggregate_rate: 2
prefix_groups: [{name: sys, length: 512}]
clients:
  - name: chat
    tenant_id: acme
    rate_fraction: 0.5
    input: {dist: lognormal, mu: 5, sigma: 0.5}
    output: {dist: lognormal, mu: 5, sigma: 0.5}
    prefix: {reuse_probability: 1}
    conversation: {turns: {dist: uniform, min: 2, max: 6}, think_time: {dist: exponential, mean: 3}, context_growth: accumulate}
  - {name: api, tenant_id: globex, rate_fraction: 0.5, input: 800, output: 100, arrival: {process: gamma, cv: 3}}
`)
	rows, _ := collect(t, s)
	y, err := FitSpec(rows, "synth")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Parse([]byte(y), "fitted.yaml", ".")
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if len(fs.Clients) != 2 || fs.Clients[1].Conversation == nil || fs.Clients[1].Conversation.ContextGrowth != "accumulate" || fs.Clients[0].Arrival.Process != "gamma" {
		t.Fatalf("fitted spec:\n%s", y)
	}
	if len(fs.PrefixGroups) != 1 || fs.PrefixGroups[0].Length < 256 {
		t.Fatalf("prefix groups %+v\n%s", fs.PrefixGroups, y)
	}
	_, want, got, err := FitComparison(rows, fs)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(want.TurnsMean-got.TurnsMean) > 0.5 || math.Abs(want.In.Mean-got.In.Mean) > 0.2*want.In.Mean {
		t.Fatalf("trace %+v\nfitted %+v\n%s", want, got, y)
	}
}

func TestFitErrors(t *testing.T) {
	r := trace.NewRequest("a")
	r.ArrivalUS, r.InputTokens = 0, 5
	if _, err := FitSpec([]trace.Request{r}, "one.arrow"); err == nil || err.Error() != "one.arrow: 1 requests with an arrival time over 0.000 s: fitting needs at least two root requests at different times" {
		t.Fatal(err)
	}
}
