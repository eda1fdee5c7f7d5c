package report

import (
	"path/filepath"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// cell returns the value of column col in the first row of table name.
func cellOf(t *testing.T, rep *Report, name, col string) Cell {
	t.Helper()
	for _, tb := range rep.Tables {
		if tb.Name != name {
			continue
		}
		for j, c := range tb.Columns {
			if c == col {
				return tb.Rows[0][j]
			}
		}
		t.Fatalf("table %s has no column %s (%v)", name, col, tb.Columns)
	}
	t.Fatalf("no table %s", name)
	return Cell{}
}

// Hand-checked tiered-KV and P/D tables: two P/D requests over 1 s.
func TestKVTables(t *testing.T) {
	dir := t.TempDir()
	results, steps := filepath.Join(dir, "r.arrows"), filepath.Join(dir, "s.arrows")
	sink, err := trace.Create(results, nil, trace.ResultsSchema(trace.NewMeta()))
	if err != nil {
		t.Fatal(err)
	}
	w := trace.NewResultWriter(sink, trace.ResultsSchema(trace.NewMeta()))
	for _, x := range []struct {
		id                 string
		arr, fin           int64
		in, gpu, cpu, thr  int32
		reload, xfer, wait int64
	}{
		// 1,000 input tokens: 200 from the GPU, 400 reloaded from the CPU
		// tier in 2 ms, 100 of them thrashing; transfer 10 ms, no wait.
		{"a", 0, 500_000, 1000, 200, 400, 100, 2000, 10_000, 0},
		// 1,000 input tokens, nothing cached; transfer 30 ms of which 20 waited.
		{"b", 200_000, 1_000_000, 1000, 0, 0, 0, 0, 30_000, 20_000},
	} {
		r := trace.NewResult(trace.NewRequest(x.id))
		r.ArrivalUS, r.InputTokens, r.OutputTokens, r.GeneratedTokens = x.arr, x.in, 10, 10
		r.Status, r.InstanceID, r.EnqueuedUS, r.FirstScheduledUS, r.FirstTokenUS, r.FinishedUS = trace.StatusCompleted, 1, x.arr, x.arr, x.arr+50_000, x.fin
		r.TTFTUS, r.E2EUS = 50_000, x.fin-x.arr
		r.CachedTokens, r.CachedTokensGPU, r.KVThrashTokens, r.KVReloadUS = x.gpu+x.cpu, x.gpu, x.thr, x.reload
		r.CachedTokensTier = []int32{x.cpu, 0}
		r.PrefillReplica, r.DecodeReplica, r.ReplicaID = "d/0", "d/1", "d/1"
		r.KVTransferUS, r.KVTransferWaitUS, r.KVTransferBytes = x.xfer, x.wait, 250_000_000
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	writeSteps(t, steps, []trace.Step{
		{InstanceID: 0, StartUS: 0, DurationUS: 100_000, PrefillTokens: 1000, Role: "prefill", ReplicaID: "d/0", KVOffloads: 30, KVReloads: 25},
		{InstanceID: 0, StartUS: 200_000, DurationUS: 100_000, PrefillTokens: 1000, Role: "prefill", ReplicaID: "d/0"},
		{InstanceID: 1, StartUS: 100_000, DurationUS: 500_000, PrefillTokens: 2, DecodeTokens: 18, Role: "decode", ReplicaID: "d/1"},
	})
	rep, err := Build([]string{results}, Options{Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table, col string
		want       float64
	}{
		{"kv_tiers", "gpu_hit_pct", 10}, {"kv_tiers", "cpu_hit_pct", 20}, {"kv_tiers", "reloads", 1},
		{"kv_tiers", "reload_tok_per_s", 400}, // span 1 s
		{"kv_tiers", "reload_mean_ms", 2}, {"kv_tiers", "thrash_pct", 25},
		{"kv_tiers", "offload_blk_per_s", 30}, {"kv_tiers", "reload_blk_per_s", 25},
		{"pd", "transfers", 2}, {"pd", "gb_per_s", 0.5}, {"pd", "mean_ms", 20}, {"pd", "max_ms", 30}, {"pd", "waited_pct", 50},
		{"pools", "busy_pct", 20}, // prefill: 200 ms busy over 1 replica × 1 s
	} {
		if got := cellOf(t, rep, c.table, c.col); !got.IsNum || got.Num != c.want {
			t.Errorf("%s.%s = %+v, want %g", c.table, c.col, got, c.want)
		}
	}
	if got := cellOf(t, rep, "kv_tiers", "thrashing"); got.Text != "yes" {
		t.Errorf("thrashing %q", got.Text)
	}
	if got := cellOf(t, rep, "pd", "pd_backpressure"); got.Text != "yes" {
		t.Errorf("pd_backpressure %q", got.Text)
	}
}
