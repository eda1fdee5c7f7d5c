package bundle_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
)

// TestReplicaTierViews: a routing policy sees each replica's lower KV
// tiers (r.kv_tiers: name, blocks held and capacity, offload and reload
// rates) and their sums (kv_lower_*, kv_offload_rate, kv_reload_rate),
// with the same values in Starlark and in a decision tree. Two 30-block
// prompts alternate on one replica with 40 GPU blocks and a 100-block CPU
// tier: blocks move down and back, so the rates become positive.
func TestReplicaTierViews(t *testing.T) {
	c := config.Default()
	c.Engine.KVBlocks = 40
	c.Latency = config.Latency{Mode: "linear", Beta: []float64{1000, 1, 10}}
	d := c.Resolved()[0]
	d.ID = "d"
	bw := 1.0
	d.KV = &config.KV{Offload: "lazy", BytesPerToken: 1000, Tiers: []config.Tier{{Name: "cpu", CapacityBlocks: 100, BandwidthGBs: &bw}}}
	c.Deployments = []config.Deployment{d}
	var reqs []row.Request
	for i := 0; i < 60; i++ {
		r := row.NewRequest(fmt.Sprint("p", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i)*100_000, 30*16+1, 1
		for j := uint64(0); j < 30; j++ {
			r.PrefixHashes = append(r.PrefixHashes, uint64(1+i%2)*1000+j)
		}
		reqs = append(reqs, r)
	}
	star := `
def route(request, cluster):
    r = cluster.replicas[0]
    t = r.kv_tiers[0]
    if (t.used_blocks != r.kv_lower_used_blocks or t.total_blocks != r.kv_lower_total_blocks or
        t.offload_rate != r.kv_offload_rate or t.reload_rate != r.kv_reload_rate or t.utilization != r.kv_lower_utilization):
        fail("tier and sums disagree")
    s = state.setdefault("s", {"name": t.name, "total": t.total_blocks, "max_used": 0, "max_off": 0.0, "max_rel": 0.0})
    s["max_used"] = max(s["max_used"], t.used_blocks)
    s["max_off"] = max(s["max_off"], t.offload_rate)
    s["max_rel"] = max(s["max_rel"], t.reload_rate)
    return r.id
`
	st := runStar(t, c, reqs, "routing", star)
	if !strings.Contains(st, `"name": "cpu", "total": 100,`) {
		t.Fatalf("state %s: tier name or capacity", st)
	}
	// Both prompts' blocks end up in the tier (evicted in turn; the GPU
	// holds the rest); every request reloads part of its prompt, 10
	// requests a second.
	var used int
	var off, rel float64
	if _, err := fmt.Sscanf(st[strings.Index(st, `"max_used": `):], `"max_used": %d, "max_off": %g, "max_rel": %g`, &used, &off, &rel); err != nil ||
		used < 30 || used > 60 || off <= 0 || rel < 100 {
		t.Fatalf("state %s: max used %d, offload %g and reload %g blocks/s (err %v)", st, used, off, rel, err)
	}
	// A decision tree reads the sums too.
	tree := "routing:\n  kind: decision_tree\n  tree: {if: \"replica.kv_lower_total_blocks == 100 and replica.kv_reload_rate >= 0 and replica.kv_lower_utilization <= 1\", then: {score: 1}, else: {score: 0}}\n"
	if _, _, err := simulate(t, c, writeBundle(t, map[string]string{"b.yaml": tree}), reqs); err != nil {
		t.Fatal(err)
	}
}

// runStar runs reqs on cfg with one Starlark stage and returns the stage's
// state dict at the end.
func runStar(t *testing.T, cfg config.Cluster, reqs []row.Request, stage, src string) string {
	t.Helper()
	b, err := bundle.Load(writeBundle(t, map[string]string{"b.yaml": stage + ": {kind: starlark, file: s.star}\n", "s.star": src}), bundle.Env{})
	if err != nil {
		t.Fatal(err)
	}
	models, _, err := engine.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := b.Instantiate(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(cfg, models, engine.SliceSource(reqs), &memSink{}, engine.Options{CheckInvariants: true, Policies: rt.Policies()}); err != nil {
		t.Fatal(err)
	}
	return rt.State(stage)
}
