package sweep

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/trace"
)

func load(t *testing.T, name string) *Spec {
	t.Helper()
	s, err := Load(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func plan(t *testing.T, s *Spec) *Plan {
	t.Helper()
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func execute(t *testing.T, p *Plan, o Options) Stats {
	t.Helper()
	st, err := Execute(p, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Errors) > 0 {
		t.Fatalf("runs could not run: %v", st.Errors)
	}
	return st
}

func summarise(t *testing.T, p *Plan, out string) ([]byte, []byte) {
	t.Helper()
	sum, err := Collect(p, out)
	if err != nil {
		t.Fatal(err)
	}
	runs, pts := sum.RunsTable(), sum.PointsTable()
	defer runs.Release()
	defer pts.Release()
	rp, pp := filepath.Join(out, "summary.parquet"), filepath.Join(out, "points.parquet")
	if err := WriteTable(rp, runs); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(pp, pts); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(rp)
	b, _ := os.ReadFile(pp)
	return a, b
}

// The check: a 3 x 3 x 5-seed sweep of the demo trace completes
// with 45 runs; a rerun does nothing; deleting one result reruns exactly
// that run, and the summary comes out byte-identical.
func TestDemoSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("45 simulations of the demo trace")
	}
	out := t.TempDir()
	p := plan(t, load(t, "../../../examples/sweeps/demo.yaml"))
	if len(p.Points) != 9 || len(p.Runs) != 45 {
		t.Fatalf("%d points, %d runs; want 9, 45", len(p.Points), len(p.Runs))
	}
	st := execute(t, p, Options{Out: out, Workers: 2})
	if st.Total != 45 || st.Done != 45 || st.Skipped != 0 || st.Failed != 0 {
		t.Fatalf("first run: %+v", st.Progress)
	}
	runs1, pts1 := summarise(t, p, out)

	st = execute(t, p, Options{Out: out, Workers: 2})
	if st.Done != 0 || st.Skipped != 45 {
		t.Fatalf("rerun: %+v, want every run skipped", st.Progress)
	}

	victim := p.Runs[17].ID
	if err := os.Remove(recordPath(out, victim)); err != nil {
		t.Fatal(err)
	}
	var ran []string
	o := Options{Out: out, Workers: 2, Progress: func(Progress) {}}
	st = execute(t, p, o)
	if st.Done != 1 || st.Skipped != 44 {
		t.Fatalf("after deleting one result: %+v, want 1 run and 44 skipped", st.Progress)
	}
	_ = ran
	runs2, pts2 := summarise(t, p, out)
	if !bytes.Equal(runs1, runs2) || !bytes.Equal(pts1, pts2) {
		t.Fatal("the summary changed after rerunning one run: runs are not deterministic")
	}

	// The summary: 45 run rows (one group), 9 point rows with CIs.
	rt, err := report.ReadSweep(filepath.Join(out, "summary.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Rows) != 45 || rt.Kind != report.TableSweepRuns {
		t.Fatalf("summary: %d rows of %s, want 45 runs", len(rt.Rows), rt.Kind)
	}
	pt, err := report.ReadSweep(filepath.Join(out, "points.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pt.Rows) != 9 {
		t.Fatalf("points: %d rows, want 9", len(pt.Rows))
	}
	col := func(name string) int {
		j := slices.Index(pt.Columns, name)
		if j < 0 {
			t.Fatalf("points has no column %s (columns: %v)", name, pt.Columns)
		}
		return j
	}
	reps, p99, ci, rep := col("replications"), col("ttft_p99_ms"), col("ttft_p99_ms_ci95"), col("replicas")
	for _, r := range pt.Rows {
		if r[reps].Num != 5 {
			t.Errorf("point with %v replications, want 5", r[reps].Num)
		}
		if math.IsNaN(r[ci].Num) || r[ci].Num < 0 {
			t.Errorf("ttft_p99 CI %v: want a defined half-width (the seeds sample different sessions)", r[ci].Num)
		}
	}
	// More replicas never make the p99 TTFT worse on this trace.
	byRouter := map[string][]float64{}
	rc := col("router.routing")
	for _, r := range pt.Rows {
		byRouter[r[rc].Text] = append(byRouter[r[rc].Text], r[p99].Num)
		_ = r[rep]
	}
	for k, v := range byRouter {
		if !(v[0] >= v[1] && v[1] >= v[2]) {
			t.Errorf("%s: p99 ttft over 2, 4, 8 replicas = %v: not decreasing", k, v)
		}
	}
}

// Two output directories, same spec: byte-identical summaries; a synth
// workload with a swept rate, grouped metrics and a cost.
func TestSynthSweepDeterministic(t *testing.T) {
	s := load(t, "chat.yaml")
	s.Cost = map[string]float64{"h100": 2.5}
	p := plan(t, s)
	if len(p.Runs) != 8 {
		t.Fatalf("%d runs, want 8", len(p.Runs))
	}
	a, b := t.TempDir(), t.TempDir()
	execute(t, p, Options{Out: a, Workers: 2})
	execute(t, p, Options{Out: b, Workers: 1})
	ra, pa := summarise(t, p, a)
	rb, pb := summarise(t, p, b)
	if !bytes.Equal(ra, rb) || !bytes.Equal(pa, pb) {
		t.Fatal("two executions of one plan gave different summaries")
	}
	pt, err := report.ReadSweep(filepath.Join(a, "points.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	rate, reps, cost, req := slices.Index(pt.Columns, "workload.aggregate_rate"), slices.Index(pt.Columns, "replicas"),
		slices.Index(pt.Columns, "cost_per_hour"), slices.Index(pt.Columns, "req_per_s")
	if rate < 0 || cost < 0 || req < 0 || slices.Index(pt.Columns, "slo_all_met_pct") < 0 {
		t.Fatalf("columns %v", pt.Columns)
	}
	for _, r := range pt.Rows {
		if r[cost].Num != 2.5*r[reps].Num {
			t.Errorf("cost %v for %v replicas, want 2.5/h each", r[cost].Num, r[reps].Num)
		}
		// About aggregate_rate requests per second over the minute.
		if got, want := r[req].Num, r[rate].Num; got < want*0.7 || got > want*1.3 {
			t.Errorf("rate %v: %v req/s", want, got)
		}
	}
}

// A run the engine refuses (a model too big for the GPU) is recorded as
// failed, with the reason, and not retried.
func TestFailedRunRecorded(t *testing.T) {
	s, err := Parse([]byte("workload: {trace: ../../../testdata/azure2023_code.csv, limit: 50}\naxes:\n  model: [llama-3.1-8b, llama-3.1-70b]\n"), "f.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, s)
	out := t.TempDir()
	st := execute(t, p, Options{Out: out})
	if st.Done != 1 || st.Failed != 1 {
		t.Fatalf("%+v: want one run done and one failed", st.Progress)
	}
	rec, err := readRecord(out, p.Runs[1].ID)
	if err != nil || rec == nil || !strings.Contains(rec.Error, "weights need") {
		t.Fatalf("record %+v, %v: want the weights-do-not-fit error", rec, err)
	}
	if st := execute(t, p, Options{Out: out}); st.Skipped != 2 {
		t.Fatalf("rerun: %+v, want both skipped", st.Progress)
	}
	sum, err := Collect(p, out)
	if err != nil {
		t.Fatal(err)
	}
	pts := sum.Points()
	if pts[1].Failed != 1 || pts[1].N != 0 || !math.IsNaN(pts[1].Mean[0]) {
		t.Errorf("failed point: %+v", pts[1])
	}
}

// Sharding covers every run exactly once; Missing names the shards left.
func TestShards(t *testing.T) {
	s := load(t, "chat.yaml")
	p := plan(t, s)
	out := t.TempDir()
	total := 0
	for i := 0; i < 3; i++ {
		if i == 1 {
			continue // a task that failed
		}
		st := execute(t, p, Options{Out: out, ShardIndex: i, ShardCount: 3})
		total += st.Total
	}
	missing, shards := Missing(p, out, 3)
	if !slices.Equal(shards, []int{1}) || len(missing)+total != len(p.Runs) {
		t.Fatalf("missing %d runs in shards %v after shards 0 and 2 (of %d runs, %d done)", len(missing), shards, len(p.Runs), total)
	}
	if _, err := Collect(p, out); err == nil {
		t.Fatal("Collect with missing runs: no error")
	}
	execute(t, p, Options{Out: out, ShardIndex: 1, ShardCount: 3})
	if m, _ := Missing(p, out, 3); len(m) != 0 {
		t.Fatalf("%d runs still missing", len(m))
	}
}

// Summary columns are plain: one per axis and per metric; a value with a
// comma (a mapping) is quoted in the CSV, so CSV readers keep the columns.
func TestCSVColumns(t *testing.T) {
	body := "workload: {trace: ../../../testdata/azure2023_code.csv, limit: 200}\nreport: {slo: \"ttft=200ms,tpot=50ms\"}\n" +
		"axes:\n  router.routing: [weighted]\n  router.weights: [{load: 1, prefix: 2}, {kv: 1}]\n"
	s, err := Parse([]byte(body), "c.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, s)
	out := t.TempDir()
	execute(t, p, Options{Out: out})
	summarise(t, p, out)
	pt, err := report.ReadSweep(filepath.Join(out, "points.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := pt.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d CSV lines, want a header and 2 points", len(recs))
	}
	w := slices.Index(recs[0], "router.weights")
	if w < 0 || recs[1][w] != "{load: 1, prefix: 2}" || recs[2][w] != "{kv: 1}" {
		t.Fatalf("router.weights column %d: %q, %q", w, recs[1], recs[2])
	}
	for _, r := range recs[1:] {
		if len(r) != len(recs[0]) {
			t.Fatalf("a row has %d fields, the header %d", len(r), len(recs[0]))
		}
	}
	if !strings.Contains(text, `"{load: 1, prefix: 2}"`) {
		t.Error("the mapping value is not quoted")
	}
}

// Axes address the deployments form of the cluster config too; the
// min-replicas search finds a pool's replicas axis.
func TestDeploymentsAxis(t *testing.T) {
	body := `cluster:
  deployments:
    - {id: llama8b, model: llama-3.1-8b, gpu: h100, pools: [{role: monolithic, replicas: 1}]}
workload: {trace: ../../../testdata/azure2023_code.csv, limit: 600}
axes:
  deployments[0].pools[0].replicas: {from: 1, to: 3}
`
	s, err := Parse([]byte(body), "d.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Axes[0].Int {
		t.Error("a pool's replicas are integers (from the config's types)")
	}
	p := plan(t, s)
	if len(p.Runs) != 3 {
		t.Fatalf("%d runs", len(p.Runs))
	}
	out := t.TempDir()
	execute(t, p, Options{Out: out})
	sum, err := Collect(p, out)
	if err != nil {
		t.Fatal(err)
	}
	for i, ps := range sum.Points() {
		if ps.GPUs != int64(i+1) || ps.N != 1 {
			t.Errorf("point %d: %d GPUs, %d runs", i, ps.GPUs, ps.N)
		}
	}
	cons, _ := ParseConstraints([]string{"p99_ttft<=1h"})
	res, err := Find(s, FindOptions{Goal: MinReplicas, Constraints: cons, Exec: Options{Out: out}})
	if err != nil {
		t.Fatal(err)
	}
	if a := res.Answers[0]; !a.Found || a.Value.Value != "1" || res.Axis.Name != "deployments[0].pools[0].replicas" {
		t.Errorf("search over %s: %+v", res.Axis.Name, a)
	}
}

// A trace workload's blis.prefix_unique promise reaches the engine: broken,
// it fails the run as bad input.
func TestTracePrefixUniquePromise(t *testing.T) {
	path := filepath.Join(t.TempDir(), "promise.arrows")
	md := trace.NewMeta()
	md.Set(trace.MetaSorted, "arrival")
	md.Set(trace.MetaPrefixUnique, "true")
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(path, nil, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewRequestWriter(sink, schema)
	for i := range 3 {
		r := trace.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i)*100_000, 64, 4
		r.PrefixHashes = []uint64{7, 8, 9, 10} // the same prompt: the promise is false
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Parse([]byte("workload: {trace: "+path+"}\naxes:\n  replicas: [1]\n"), "u.yaml", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, s)
	out := t.TempDir()
	if st := execute(t, p, Options{Out: out}); st.Failed != 1 {
		t.Fatalf("%+v: want the run failed", st.Progress)
	}
	rec, err := readRecord(out, p.Runs[0].ID)
	if err != nil || rec == nil || !strings.Contains(rec.Error, "blis.prefix_unique") {
		t.Fatalf("record %+v, %v: want the broken promise", rec, err)
	}
}
