package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/trace"
)

func TestPercentileNearestRank(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{{0.5, 5}, {0.9, 9}, {0.99, 10}, {0.01, 1}} {
		if got := pct(v, c.q); got != c.want {
			t.Errorf("pct(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if !math.IsNaN(pct(nil, 0.5)) {
		t.Error("empty: want NaN")
	}
}

// Capacity counts completions over the longest queued stretch only.
func TestCapacityWindow(t *testing.T) {
	// 20 requests arriving at 0, finishing one per second from t=1.5 s.
	var rs []reqTimes
	for i := 0; i < 20; i++ {
		f := 1.5e6 + float64(i)*1e6
		rs = append(rs, reqTimes{arrival: 0, ttft: f / 2, e2e: f, out: 10})
	}
	queued := func(t float64) bool { return t >= 2 && t <= 12 } // 10 s with a queue
	s := statsOf(rs, queued, 30)
	if s.capWindow != [2]float64{2, 12} || math.Abs(s.capacity-1) > 1e-9 {
		t.Fatalf("capacity %g over %v, want 1 req/s over [2, 12]", s.capacity, s.capWindow)
	}
	if s2 := statsOf(rs, func(float64) bool { return false }, 30); !math.IsNaN(s2.capacity) {
		t.Errorf("never saturated: capacity %g, want NaN", s2.capacity)
	}
	if s.tput <= 0 || math.Abs(pct(s.tpot, 0.5)-(pct(s.e2e, 0.5)/2)/9) > 1e-6 {
		t.Errorf("tput %g, p50 tpot %g", s.tput, pct(s.tpot, 0.5))
	}
}

// The simulated series is the state after the last step that ended by t.
func TestSimSeries(t *testing.T) {
	steps := []trace.Step{
		{StartUS: 0, DurationUS: 500_000, Waiting: 5, Running: 2, KVBlocksUsed: 10},
		{StartUS: 500_000, DurationUS: 600_000, Waiting: 3, Running: 4, KVBlocksUsed: 50},
		{StartUS: 1_100_000, DurationUS: 2_000_000, Waiting: 0, Running: 1, KVBlocksUsed: 20},
	}
	got := simSeries(steps, 100, 4)
	want := []tick{{5, 2, 10}, {3, 4, 50}, {3, 4, 50}, {0, 1, 20}}
	if len(got) != len(want) {
		t.Fatalf("%d ticks, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("t=%ds: %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

func TestPoolNormalisesStatistics(t *testing.T) {
	var p pool
	p.add("roofline", "Hopper", "r", "mean TTFT", 110, 100)
	p.add("roofline", "Hopper", "r", "p50 TTFT", 90, 100)
	p.add("roofline", "Hopper", "r", "p90 TTFT", 500, 100) // the p50 stands for a run
	p.add("roofline", "Hopper", "r", "mean TPOT", 80, 100)
	rows := p.rows()
	if len(rows) != 1 || rows[0].N != 2 || math.Abs(rows[0].TTFT-10) > 1e-9 || math.Abs(rows[0].TTFTB) > 1e-9 || math.Abs(rows[0].TPOT-20) > 1e-9 || rows[0].Cap != nil {
		t.Fatalf("rows %+v", rows)
	}
	// Capacity only where a saturated run gave one: 1.30 against 1.43 req/s.
	p.add("roofline", "Hopper", "r", "capacity (saturated)", 1.30, 1.43)
	rows = p.rows()
	if rows[0].CapN != 1 || rows[0].Cap == nil || math.Abs(*rows[0].Cap-(1-1.30/1.43)*100) > 1e-9 || *rows[0].CapB > 0 {
		t.Fatalf("capacity %+v", rows[0])
	}
}

func TestRewriteBetweenMarkers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "doc.md")
	os.WriteFile(p, []byte("head\n"+beginMark+"\nold\n"+endMark+"\ntail\n"), 0o644)
	if err := rewrite(p, "new table\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if want := "head\n" + beginMark + "\n\nnew table\n" + endMark + "\ntail\n"; string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
	os.WriteFile(p, []byte("no markers\n"), 0o644)
	if err := rewrite(p, "x"); err == nil || !strings.Contains(err.Error(), "markers") {
		t.Errorf("missing markers: %v", err)
	}
}

// The real RTX 4090 run replays with its own engine settings, completely and
// deterministically, and vLLM's time series is read. Without ../shared/data
// (or $BLIS_SHARED_DATA) it skips, and make test says so
// (scripts/shared-data-tests.sh); BLIS_REQUIRE_SHARED=1 (CI) fails instead.
func TestSharedDataReplay(t *testing.T) {
	data := os.Getenv("BLIS_SHARED_DATA")
	if data == "" {
		data = "../../../shared/data"
	}
	if _, err := os.Stat(filepath.Join(data, "measurements/llmservingsim")); err != nil {
		if os.Getenv("BLIS_REQUIRE_SHARED") == "1" {
			t.Fatalf("BLIS_REQUIRE_SHARED=1 and no shared data at %s: %v", data, err)
		}
		t.Skipf("shared data not present at %s: %v", data, err)
	}
	runs, err := loadRuns(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) < 2 {
		t.Fatalf("%d runs", len(runs))
	}
	r := runs[0]
	if r.name != "RTX4090/Llama-3.1-8B" || len(r.reqs) != 300 || r.series == nil || r.setup.Engine.Engine.MaxNumBatchedTokens != 2048 || r.setup.Engine.Engine.KVBlocks != 2588 {
		t.Fatalf("run %s: %d requests, engine %+v", r.name, len(r.reqs), r.setup.Engine.Engine)
	}
	a, b := evalRun(r, "roofline"), evalRun(r, "roofline")
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.sim.ttft) != 300 || pct(a.sim.ttft, 0.5) != pct(b.sim.ttft, 0.5) || a.sim.capacity != b.sim.capacity {
		t.Fatalf("%d completed; p50 TTFT %g vs %g", len(a.sim.ttft), pct(a.sim.ttft, 0.5), pct(b.sim.ttft, 0.5))
	}
	if math.IsNaN(a.real.capacity) || math.IsNaN(a.sim.capacity) {
		t.Errorf("the run saturates: capacity real %g sim %g", a.real.capacity, a.sim.capacity)
	}
}

// The known-error table blis-sim quotes (lib/latency/knownerror.json) and
// the pooled table of docs/latency.md come from the same harness run: make
// fidelity writes both, and this catches one regenerated without the other.
func TestKnownErrorMatchesDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/latency.md")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte("#### Pooled:"))
	if i < 0 {
		t.Fatal("docs/latency.md has no pooled table")
	}
	var rows int
	for _, line := range strings.Split(string(doc[i:]), "\n")[4:] {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		f := strings.Split(strings.Trim(line, "| "), " | ")
		if len(f) < 6 {
			t.Fatalf("pooled row %q", line)
		}
		k, ok := latency.KnownError(f[0], f[1], f[2])
		if !ok {
			t.Errorf("docs row %q is not in lib/latency/knownerror.json", line)
			continue
		}
		if want := fmt.Sprintf("%d", k.Points); f[3] != want || f[4] != errCell(k.TTFT, k.TTFTBias) || f[5] != errCell(k.TPOT, k.TPOTBias) {
			t.Errorf("docs row %q, knownerror.json %+v: regenerate both with make fidelity", line, k)
		}
		rows++
	}
	if rows != len(latency.KnownErrors()) {
		t.Errorf("docs has %d pooled rows, knownerror.json %d", rows, len(latency.KnownErrors()))
	}
}

// The leave-one-model-out fold fits α0 by the parabola through the best
// grid point and its neighbours, and the load-response and goal cells are
// medians of per-stage errors.
func TestOpenLoopCells(t *testing.T) {
	xs := []float64{0, 1000, 2000, 3000}
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = (x - 1730) * (x - 1730) // a parabola with its vertex at 1730
	}
	if got := gridMin(xs, ys, 2); got != 1730 {
		t.Errorf("vertex %g, want 1730", got)
	}
	if got := gridMin(xs, ys, 0); got != 0 {
		t.Errorf("at the grid's end: %g", got)
	}
	if got := cellOf([]float64{-0.1, 0.3, -0.05}); got != "10.0% (-5.0%)" {
		t.Errorf("cell %q", got)
	}
	if got := cellOf(nil); got != "–" {
		t.Errorf("empty cell %q", got)
	}
}

// The derived table regenerates byte for byte from a checkout (skipped
// without one: the repository is not vendored).
func TestDeriveOpenLoop(t *testing.T) {
	dir := os.Getenv("BLIS_TRAINING_CHECKOUT")
	if dir == "" {
		t.Skip("set BLIS_TRAINING_CHECKOUT to a checkout of inference-sim/training at ed5c1d26")
	}
	var b bytes.Buffer
	if err := deriveOpenLoop(dir, "ed5c1d26900e6909758d5e1641a18edaf56a1caf", &b); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", openLoopTable))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("%s differs from what the checkout derives", openLoopTable)
	}
}

// A pure-decode second gives the step as running / generated tokens per
// second and the context from the requests' own times; seconds with
// prompt tokens are left out.
func TestDecodeSteps(t *testing.T) {
	var reqs []trace.Request
	for i := 0; i < 4; i++ { // 100 prompt tokens, 1,000 generated over 0–10 s
		q := trace.NewRequest(fmt.Sprint(i))
		q.ArrivalUS, q.RecordedTTFTUS, q.RecordedE2EUS = 0, 0, 10_000_000
		q.InputTokens, q.OutputTokens = 100, 1000
		reqs = append(reqs, q)
	}
	lin := &latency.Linear{Beta0: 2000, Beta2: 20}               // 2 ms + 20 µs a decode token
	setup := &fit.Setup{Resolved: &resolve.Resolved{Model: lin}} // synchronous: no host time
	series := []measure.Sample{{T: 5, Running: 4, GenTput: 400}, // 10 ms steps
		{T: 6, Running: 4, GenTput: 400, PromptTput: 50}} // a prefill: left out
	var b strings.Builder
	writeDecodeSteps(&b, []*recordedRun{{name: "x", reqs: reqs, setup: setup, series: series}})
	// Context at 4.5 s: 100 + 0.45·1,000; the linear model's step for 4 decodes: 2,080 µs.
	if want := "| x | 1–4 | 1 | 550 | 10.0 ms | 2.1 ms (-79%) |"; !strings.Contains(b.String(), want) {
		t.Errorf("got\n%s\nwant a row %s", b.String(), want)
	}
}

// The reconstruction: requests decoding at their own mean rate give the
// step as batch / tokens per second; a second in which a request that
// later failed was alive while the successes held fewer than
// max_num_seqs slots is dropped (the failed one may have been decoding).
func TestReplaySeconds(t *testing.T) {
	e := &replayExp{name: "x", maxSeqs: 4, generated: 1001}
	for i := 0; i < 3; i++ { // first token at 1 s, 1,000 more over 10 s: 10 ms a token
		e.reqs = append(e.reqs, replayReq{arrival: 0, first: 1, end: 11, in: 100, out: 7})
	}
	e.reqs = append(e.reqs, replayReq{arrival: 0.5, end: 6.5, failed: true, first: math.NaN()})
	s := e.seconds()
	if len(s) != 12 {
		t.Fatalf("%d seconds, want 12", len(s))
	}
	for k := 1; k <= 6; k++ { // the failed request is alive and 3 < 4 slots are known
		if !math.IsNaN(s[k].step) {
			t.Errorf("second %d: step %g, want dropped", k, s[k].step)
		}
	}
	// Second 8: 3 requests, 100 tokens each; context at 8.5 s: 100 + 1 + 750.
	if got := s[8]; math.Abs(got.step-0.010) > 1e-9 || math.Abs(got.batch-3) > 1e-9 || math.Abs(got.ctx-851) > 1e-9 || got.waiting != 0 {
		t.Errorf("second 8: %+v, want step 10 ms, batch 3, context 851, none waiting", got)
	}
	if got := s[0].waiting; math.Abs(got-3.5) > 1e-9 { // three waiting the whole second, the failed one half
		t.Errorf("second 0: waiting %g, want 3.5", got)
	}
	// Without a fixed output length each request's own count stands in.
	e.generated = 0
	if got := e.seconds()[8].step; math.Abs(got-10.0/6) > 1e-9 {
		t.Errorf("output_tokens 7 over 10 s: step %g s, want %g", got, 10.0/6)
	}
}

// KV capacity against the four deployments' vLLM logs (replay_data's
// kv_blocks_total_gpu): within 1% on one GPU, where the memory profile's
// constants were read (vLLM 0.17–0.19 logs), and 5% with TP, where these
// runs' vLLM (February 2026, version unrecorded) kept 0.9–1.2 GiB more KV
// per GPU than vLLM 0.19's all-reduce and NCCL buffers leave
// (docs/latency.md, "Issue 27, ninth pass").
func TestReplayKVBlocks(t *testing.T) {
	rows, err := readSteps(filepath.Join("..", "..", stepsTable))
	if err != nil {
		t.Fatal(err)
	}
	real := map[string]int{}
	for _, r := range rows {
		real[r.exp] = r.kvBlocks
	}
	runs, err := loadOpenLoop(filepath.Join("..", "..", openLoopTable), fit.Deployment{AsyncScheduling: openLoopAsync})
	if err != nil {
		t.Fatal(err)
	}
	deps := map[string]bool{}
	for _, r := range runs {
		want, ok := real[r.Name]
		if !ok {
			t.Errorf("%s: not in %s", r.Name, stepsTable)
			continue
		}
		deps[fmt.Sprintf("%s tp%d", modelOf(r), r.Setup.Dep.TP)] = true
		got := r.Setup.Engine.Engine.KVBlocks
		// With TP these runs' vLLM (~0.14–0.16) kept ~1.5 GiB a GPU less
		// outside torch than the 0.17–0.19 logs the reserve is read from:
		// 5.9% of Mixtral's cache (docs/latency.md, ninth pass).
		tol := 0.07
		if r.Setup.Dep.TP == 1 {
			tol = 0.01
		}
		if e := float64(got)/float64(want) - 1; math.Abs(e) > tol {
			t.Errorf("%s (TP%d): %d KV blocks, the vLLM log %d (%+.1f%%, tolerance %.0f%%)", r.Name, r.Setup.Dep.TP, got, want, 100*e, 100*tol)
		}
	}
	if len(deps) != 4 {
		t.Errorf("%d deployments checked, want 4: %v", len(deps), deps)
	}
}

// The section judges every model, finds the saturated runs and prints the
// four deployments' KV capacity.
func TestReplayStepsSection(t *testing.T) {
	var b strings.Builder
	if err := stepsSection(&b, filepath.Join("..", "..", openLoopTable), filepath.Join("..", "..", stepsTable)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"| llama-2-7b H100 TP1 | 7462 |", "| mixtral-8x7b H100 TP2 | 27510 |",
		"| codellama-34b | 121–128 | 1,000–1,999 |", "| mixtral-8x7b-v0-1-tp2-reasoning |", "| llama-2-70b-hf-tp4-reasoning |"} {
		if !strings.Contains(out, want) {
			t.Errorf("the section has no %q:\n%s", want, out)
		}
	}
}

// The steps table regenerates byte for byte from a checkout at
// stepsCommit (skipped without one: the repository is not vendored).
func TestDeriveSteps(t *testing.T) {
	dir := os.Getenv("BLIS_TRAINING_REPLAY_CHECKOUT")
	if dir == "" {
		t.Skip("set BLIS_TRAINING_REPLAY_CHECKOUT to a checkout of inference-sim/training at " + stepsCommit[:8])
	}
	var b bytes.Buffer
	if err := deriveSteps(dir, stepsCommit, &b); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", stepsTable))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("%s differs from what the checkout derives", stepsTable)
	}
}

// The roofline's decode step against the runs' reconstructed seconds
// (docs/latency.md, "Issue 27, ninth pass"): within 8% at 700–900 tokens
// of context at every batch range with half a minute of data, on all
// four models; and within 8% in the first minute of saturation at 128 ×
// 1,800 on the two dense TP > 1 models (later minutes drift 10–12% slower
// in the real runs, which the model does not follow).
func TestReplayDecodeSteps(t *testing.T) {
	rows, err := readSteps(filepath.Join("..", "..", stepsTable))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := loadOpenLoop(filepath.Join("..", "..", openLoopTable), fit.Deployment{AsyncScheduling: openLoopAsync})
	if err != nil {
		t.Fatal(err)
	}
	models := map[*fit.OpenLoopRun]latency.Model{}
	for _, r := range runs {
		if models[r], err = stepModel(r); err != nil {
			t.Fatal(err)
		}
	}
	short := 0
	for _, c := range compareSteps(rows, runs, models) {
		if c.ctx >= 1000 || c.seconds < 30 {
			continue
		}
		short++
		if e := c.sim/c.real - 1; math.Abs(e) > 0.08 {
			t.Errorf("%s, batch %d–%d, context %.0f: roofline %.1f ms, real %.1f (%+.0f%%)", c.model, c.lo, c.hi, c.ctx, c.sim, c.real, 100*e)
		}
	}
	if short < 15 {
		t.Errorf("%d model × batch ranges at 700–900 tokens, want 15 or more", short)
	}
	dense := 0
	for _, r := range runs {
		if !strings.HasSuffix(r.Name, "reasoning") || r.Setup.Dep.TP == 1 || strings.Contains(r.Name, "mixtral") {
			continue
		}
		for _, row := range rows {
			if row.exp != r.Name || row.minute != 1 || row.lo != 121 {
				continue
			}
			dense++
			sim := simStepMS(models[r], row.batch, row.ctx)
			if e := sim/row.stepMS - 1; math.Abs(e) > 0.08 {
				t.Errorf("%s minute 1 (%.1f × %.0f): roofline %.1f ms, real %.1f (%+.0f%%)", r.Name, row.batch, row.ctx, sim, row.stepMS, 100*e)
			}
		}
	}
	if dense != 2 {
		t.Errorf("%d dense saturated runs at minute 1, want 2", dense)
	}
}

// The steps table's reader never panics, and what it accepts is usable:
// positive steps, batches and capacities.
func FuzzReadSteps(f *testing.F) {
	head := strings.Join(stepsHeader, ",") + "\n"
	f.Add(head + "x,2,128,26602,16,1,121,128,60,127.8,1806,25.13,22.0,3.58\n")
	f.Add("# comment\n" + head + "x,1,128,7462,16,0,1,16,5,8.5,1151,20.23,0.4,3.20\ny,1,128,7462,16,0,1,16,5,NaN,1,1,1,1\n")
	f.Add(head + "x,2,128,0,16,1,121,128,60,127.8,1806,25.13,22.0\n")
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := parseSteps("fuzz", strings.NewReader(s))
		if err != nil {
			return
		}
		for _, r := range rows {
			if !(r.batch >= 1) || !(r.stepMS > 0) || r.kvBlocks < 1 || r.seconds < 1 {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

// A bad row is named by its line in the file, comment lines counted.
func TestParseStepsNamesTheLine(t *testing.T) {
	head := strings.Join(stepsHeader, ",") + "\n"
	good := "x,1,128,7462,16,0,1,16,5,8.5,1151,20.23,0.4,3.20\n"
	for _, c := range []struct{ in, want string }{
		{"# source\n" + head + good + "x,1,128,7462,16,0,1,16,5,8.5,1151,fast,0.4,3.20\n", "t.csv: line 4: field step_ms: expected a number, found \"fast\""},
		{"# a\n# b\n" + head + "x,1,128,0,16,0,1,16,5,8.5,1151,20.23,0.4,3.20\n", "t.csv: line 4: expected batch ≥ 1"},
		{"# only\n" + head, "t.csv: expected rows after the header"},
		{"exp,tp\n", "t.csv: line 1: expected the header"},
	} {
		_, err := parseSteps("t.csv", strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}
