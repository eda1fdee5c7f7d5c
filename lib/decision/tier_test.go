package decision

import (
	"fmt"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/trace"
)

// tieredConfig is one replica with a GPU KV of 40 blocks of 16 tokens and
// a CPU tier below it (lazy offload, 1,000 bytes of KV per token, 1 GB/s).
func tieredConfig() config.Cluster {
	c := testConfig(1, "round-robin")
	c.Engine.KVBlocks = 40
	d := c.Resolved()[0]
	d.ID = "d"
	bw := 1.0
	d.KV = &config.KV{Offload: "lazy", BytesPerToken: 1000,
		Tiers: []config.Tier{{Name: "cpu", CapacityBlocks: 1000, BandwidthGBs: &bw}}}
	c.Deployments = []config.Deployment{d}
	return c
}

// pingPong alternates two 30-block prompts, A and B, that cannot both stay
// in 40 GPU blocks: each evicts the other to the CPU tier, from which it is
// reloaded, evicted again and reloaded within a second (thrashing).
func pingPong(n int, gapUS int64) []trace.Request {
	var reqs []trace.Request
	for i := 0; i < n; i++ {
		r := trace.NewRequest(fmt.Sprint("p", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i)*gapUS, 30*16+1, 1
		base := uint64(1 + i%2)
		for j := uint64(0); j < 30; j++ {
			r.PrefixHashes = append(r.PrefixHashes, base*1000+j)
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// TestHitTierNamesLowerTiers: a hit that came from the CPU tier is "cpu",
// not "gpu" (routing rows' hit_tier), and a ping-pong between two prompts
// that do not fit together is a cache_thrashing anomaly with its numbers.
func TestHitTierAndCacheThrashing(t *testing.T) {
	ds, as := &decisions{}, &anomalies{}
	res, rec := simulate(t, tieredConfig(), pingPong(40, 20_000), &Config{Level: Decisions, Decisions: ds, Anomalies: as})
	tiers := map[string]int{}
	for _, d := range ds.ds {
		if d.Kind == trace.DecisionRouting {
			tiers[d.HitTier]++
		}
	}
	var fromCPU int
	for _, r := range res.rs {
		if len(r.CachedTokensTier) > 0 && r.CachedTokensTier[0] > 0 {
			fromCPU++
		}
	}
	if fromCPU == 0 || tiers["cpu"]+tiers["gpu+cpu"] != fromCPU {
		t.Fatalf("hit tiers %v, %d results served from the CPU tier", tiers, fromCPU)
	}
	st := rec.Stats()
	if st.Anomalies[trace.AnomalyCacheThrashing] == 0 {
		t.Fatalf("no cache_thrashing anomaly: %v", st.Anomalies)
	}
	var found bool
	for _, a := range as.as {
		if a.Type != trace.AnomalyCacheThrashing {
			continue
		}
		found = true
		t.Logf("hit tiers %v; %s", tiers, a.Description)
		if a.ReplicaID != "d/0" || !(a.Magnitude >= 0.1) || len(a.Requests) == 0 || !strings.Contains(a.Description, "threshold 10%") {
			t.Fatalf("anomaly %+v", a)
		}
	}
	if !found {
		t.Fatal("cache_thrashing counted but not written")
	}
	// The same two prompts a minute apart: reloads, no thrashing.
	_, rec = simulate(t, tieredConfig(), pingPong(6, 60_000_000), &Config{Level: Decisions, Anomalies: &anomalies{}})
	if n := rec.Stats().Anomalies[trace.AnomalyCacheThrashing]; n != 0 {
		t.Fatalf("%d cache_thrashing anomalies for reloads a minute apart", n)
	}
}
