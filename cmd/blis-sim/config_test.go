package main

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/trace"
)

// TestResultsSayWhatRan: the results' metadata records each deployment
// (model, GPU, TP, replicas, latency model, KV blocks) and the router, for
// blis-report's header (issue 10, item 7).
func TestResultsSayWhatRan(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "reqs.arrows"), filepath.Join(dir, "res.parquet")
	writeReqs(t, in, [][5]any{{"a", int64(1000), 100, 20, ""}})
	var stderr bytes.Buffer
	if code := cliutil.RunArgs(app(), []string{"blis-sim", "-q", "--replicas", "3", "--tp", "2", "--model", "qwen3-32b", "--router", "least-kv", "-o", out, in}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	src, err := trace.Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := src.Meta().SimDeployments()
	if err != nil {
		t.Fatal(err)
	}
	want := []trace.SimDeployment{{ID: "qwen3-32b", Model: "qwen3-32b", GPU: "h100", TP: 2, Replicas: 3, Latency: "fitted:", KVBlocks: got[0].KVBlocks, SchedulingPolicy: "fcfs"}}
	if len(got) == 1 && len(got[0].Latency) > len("fitted:") {
		want[0].Latency = got[0].Latency // the shipped file found for qwen3-32b on h100 tp2
	}
	if !reflect.DeepEqual(got, want) || got[0].KVBlocks <= 0 || got[0].Latency[:7] != "fitted:" {
		t.Errorf("blis.sim.deployments = %+v", got)
	}
	if r := src.Meta().Get(trace.MetaSimRouter); r != "least-kv" {
		t.Errorf("blis.sim.router = %q", r)
	}
	// What the summary's advice reads: the other stages, what the router
	// weighs, how late it heard KV events.
	for k, want := range map[string]string{trace.MetaSimAdmission: "always", trace.MetaSimPriority: "fcfs",
		trace.MetaSimRouterSignals: "load,kv", trace.MetaSimKVEventDelay: "50000"} {
		if got := src.Meta().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if src.Meta().Get(trace.MetaSorted) != "" {
		t.Errorf("results carry blis.sorted: they come in the order requests end")
	}
}
