package engine

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

func gbs(v float64) *float64 { return &v }

func us(n int64) config.Duration { return config.Duration(time.Duration(n) * time.Microsecond) }

// oneDeployment turns the flat test config into one deployment with the
// given pools (linear model β = 1000, 1, 10; 1,000 bytes of KV per token).
func oneDeployment(c config.Cluster, pools ...config.Pool) config.Cluster {
	d := c.Resolved()[0]
	d.ID = "d"
	d.Pools = pools
	d.KV = &config.KV{Offload: "none", BytesPerToken: 1000}
	c.Deployments = []config.Deployment{d}
	return c
}

func pdConfig() config.Cluster {
	c := oneDeployment(testConfig(), config.Pool{Role: "prefill", Replicas: 1}, config.Pool{Role: "decode", Replicas: 1})
	c.Deployments[0].KVTransfer = &config.KVTransfer{Link: "rdma", BandwidthGBs: gbs(1), Latency: us(20),
		Granularity: "block", Routing: "decode-first", MaxQueue: 8}
	return c
}

// A single request on a P/D deployment: its TTFT is the prefill on the
// prefill replica, plus the KV transfer (bytes / bandwidth + latency), plus
// the decode replica's first step (the last prompt token, recomputed
// there, samples the first token).
func TestPDSingleRequestIsSumOfSteps(t *testing.T) {
	for _, routing := range []string{"decode-first", "prefill-first"} {
		t.Run(routing, func(t *testing.T) {
			c := pdConfig()
			c.Deployments[0].KVTransfer.Routing = routing
			steps := &memSteps{}
			sink, sum := run(t, c, []row.Request{req("a", 0, 100, 5)}, Options{Steps: steps})
			r := sink.rs[0]
			// Prefill: 1000 + 100·1 = 1100. Transfer: 100 tokens × 1000 B at
			// 1 GB/s (1000 B/µs) = 100 µs, + 20 µs. First decode-side step:
			// 1000 + 1 = 1001. Then 4 decodes of 1000 + 10.
			const prefill, xfer, first = 1100, 100 + 20, 1001
			if r.Status != row.StatusCompleted || r.TTFTUS != prefill+xfer+first || r.E2EUS != prefill+xfer+first+4*1010 || r.TPOTUS != 1010 {
				t.Fatalf("got %s ttft %d e2e %d tpot %d, want ttft %d", r.Status, r.TTFTUS, r.E2EUS, r.TPOTUS, prefill+xfer+first)
			}
			if r.KVTransferUS != xfer || r.KVTransferBytes != 100_000 || r.PrefillReplica != "d/0" || r.DecodeReplica != "d/1" || r.ReplicaID != "d/1" {
				t.Fatalf("transfer %d µs %d B, prefill %q decode %q replica %q", r.KVTransferUS, r.KVTransferBytes, r.PrefillReplica, r.DecodeReplica, r.ReplicaID)
			}
			if r.GeneratedTokens != 5 || r.FirstScheduledUS != 0 {
				t.Fatalf("generated %d, first scheduled %d", r.GeneratedTokens, r.FirstScheduledUS)
			}
			if len(steps.ss) != 6 || steps.ss[0].Role != "prefill" || steps.ss[0].PrefillTokens != 100 || steps.ss[1].Role != "decode" ||
				steps.ss[1].StartUS != prefill+xfer || steps.ss[1].PrefillTokens != 1 {
				t.Fatalf("steps %+v", steps.ss)
			}
			if sum.Transfers != 1 || sum.TransferBytes != 100_000 || sum.PDBackpressure != 0 {
				t.Fatalf("summary %+v", sum)
			}
		})
	}
}

// A decode replica without room for the incoming KV makes the hand-off
// wait (backpressure); the prefill replica keeps its blocks meanwhile.
// With chunk or stream, b cannot reserve when its prefill starts, so it
// asks again at its hand-off and everything is sent then, as with block.
func TestPDBackpressure(t *testing.T) {
	for _, gran := range []string{"block", "chunk", "stream"} {
		t.Run(gran, func(t *testing.T) {
			c := pdConfig()
			c.Deployments[0].Engine.KVBlocks = 10
			c.Deployments[0].KVTransfer.Granularity, c.Deployments[0].KVTransfer.Layers = gran, 4
			// a holds 7 of the decode replica's 10 blocks for 100+40 tokens (9
			// blocks by its end); b's 4 prompt blocks must wait until a finishes.
			sink, sum := run(t, c, []row.Request{req("a", 0, 100, 40), req("b", 10, 60, 2)}, Options{})
			got := sink.byID()
			a, b := got["a"], got["b"]
			if a.Status != row.StatusCompleted || b.Status != row.StatusCompleted {
				t.Fatalf("%+v %+v", a, b)
			}
			if sum.PDBackpressure != 1 || b.KVTransferUS <= 60+20 || b.FirstTokenUS < a.FinishedUS || b.KVTransferBytes != 60_000 {
				t.Fatalf("backpressure %d, b transfer %d µs %d B, b first token %d, a finished %d", sum.PDBackpressure, b.KVTransferUS, b.KVTransferBytes, b.FirstTokenUS, a.FinishedUS)
			}
		})
	}
}

// A request that times out while prefilling gives back the decode blocks
// it reserved (chunk, stream) or asked for: b, arriving after, needs all of
// them.
func TestPDTimeoutDuringPrefillReleasesReservation(t *testing.T) {
	for _, gran := range []string{"block", "chunk", "stream"} {
		t.Run(gran, func(t *testing.T) {
			c := pdConfig()
			c.Deployments[0].Engine.KVBlocks = 70 // 1,000 tokens take 63
			c.Deployments[0].Engine.MaxNumBatchedTokens = 400
			c.Deployments[0].KVTransfer.Granularity, c.Deployments[0].KVTransfer.Layers = gran, 4
			// a's prefill would end at 4000 µs; it times out at 2000.
			sink, sum := run(t, c, []row.Request{withTimeout(req("a", 0, 1000, 3), 2000), req("b", 10_000, 1000, 3)}, Options{})
			got := sink.byID()
			if got["a"].Status != row.StatusTimedOut || got["b"].Status != row.StatusCompleted || sum.PDBackpressure != 0 {
				t.Fatalf("a %s, b %s, backpressure %d", got["a"].Status, got["b"].Status, sum.PDBackpressure)
			}
		})
	}
}

func tierConfig(gpuBlocks, cpuBlocks int64) config.Cluster {
	c := oneDeployment(testConfig(), config.Pool{Role: "monolithic", Replicas: 1})
	c.Deployments[0].Engine.KVBlocks = gpuBlocks
	c.Deployments[0].KV = &config.KV{Offload: "lazy", BytesPerToken: 1000, Tiers: []config.Tier{
		{Name: "cpu", CapacityBlocks: cpuBlocks, BandwidthGBs: gbs(1), Latency: us(10), Eviction: "lru"}}}
	return c
}

// A prefix evicted from the GPU to the CPU tier is reloaded: the request
// waits for latency + bytes / bandwidth while the replica is free for
// others, then computes only its uncached tokens.
func TestTierReloadTime(t *testing.T) {
	c := tierConfig(8, 100)
	a, b, x := req("a", 0, 64, 1), req("b", 2000, 128, 1), req("c", 5000, 64, 1)
	a.PrefixHashes = hashes(1, 2, 3, 4)
	b.PrefixHashes = hashes(100, 101, 102, 103, 104, 105, 106, 107)
	x.PrefixHashes = hashes(1, 2, 3, 4)
	steps := &memSteps{}
	sink, sum := run(t, c, []row.Request{a, b, x}, Options{Steps: steps})
	r := sink.byID()["c"]
	var off, rel int32
	for _, s := range steps.ss {
		off += s.KVOffloads
		rel += s.KVReloads
	}
	if off != 8 || rel != 3 {
		t.Fatalf("steps record %d offloads, %d reloads", off, rel)
	}
	// b's 8 blocks evict a's 4 (lazy: they go to the CPU tier). c hits 3
	// of them (the last prompt token is always computed), and the 4
	// blocks it takes on the GPU evict 4 of b's, copied to the CPU tier
	// first on the same link: 4 × 16 tokens × 1000 B at 1000 B/µs = 64 µs
	// + 10 µs latency; then c's load, 3 blocks: 48 µs + 10 µs. Then one
	// step of its 16 uncached tokens: 1000 + 16.
	const reload = 64 + 10 + 48 + 10
	if r.TTFTUS != reload+1016 || r.KVReloadUS != reload || r.CachedTokens != 48 || tierTok(r, 0) != 48 || r.CachedTokensGPU != 0 || r.FirstScheduledUS != 5000+reload {
		t.Fatalf("ttft %d reload %d cached %d (gpu %d cpu %d) first scheduled %d", r.TTFTUS, r.KVReloadUS, r.CachedTokens, r.CachedTokensGPU, tierTok(r, 0), r.FirstScheduledUS)
	}
	// Offloads: a's 4 blocks, then the 3 + 1 of b's that c's blocks evict.
	if sum.TierOffloads[0] != 8 || sum.TierLoads[0] != 3 {
		t.Fatalf("offloads %v loads %v", sum.TierOffloads, sum.TierLoads)
	}
	// Without the tier, c recomputes its prompt.
	c.Deployments[0].KV = nil
	sink, _ = run(t, c, []row.Request{a, b, x}, Options{})
	if r := sink.byID()["c"]; r.CachedTokens != 0 || r.TTFTUS != 1064 {
		t.Fatalf("no tier: cached %d ttft %d", r.CachedTokens, r.TTFTUS)
	}
}

// Eager offload copies blocks as they are cached; a full tier evicts by
// its order and moves the victim to storage.
func TestTierPoliciesAndCascade(t *testing.T) {
	for _, pol := range []string{"eager", "threshold", "lazy"} {
		for _, ev := range []string{"lru", "lfu", "priority"} {
			c := tierConfig(8, 2)
			c.Deployments[0].KV.Offload = pol
			c.Deployments[0].KV.Threshold = 0.5
			c.Deployments[0].KV.Tiers[0].Eviction = ev
			c.Deployments[0].KV.Tiers = append(c.Deployments[0].KV.Tiers, config.Tier{Name: "storage", CapacityBlocks: 50, BandwidthGBs: gbs(0.5), Latency: us(100)})
			a, b, x := req("a", 0, 64, 1), req("b", 2000, 128, 1), req("c", 5000, 64, 1)
			a.PrefixHashes = hashes(1, 2, 3, 4)
			b.PrefixHashes = hashes(100, 101, 102, 103, 104, 105, 106, 107)
			x.PrefixHashes = hashes(1, 2, 3, 4)
			sink, sum := run(t, c, []row.Request{a, b, x}, Options{})
			r := sink.byID()["c"]
			if tierTok(r, 0)+tierTok(r, 1)+r.CachedTokensGPU != r.CachedTokens || r.CachedTokens != 48 {
				t.Fatalf("%s/%s: cached %d = gpu %d + cpu %d + storage %d", pol, ev, r.CachedTokens, r.CachedTokensGPU, tierTok(r, 0), tierTok(r, 1))
			}
			if sum.TierOffloads[1] == 0 || tierTok(r, 1) == 0 {
				t.Fatalf("%s/%s: nothing reached storage: %+v, result %+v", pol, ev, sum.TierOffloads, r)
			}
		}
	}
}

// Tiers are a list: a third tier named by the config (no defaults, so it
// gives its bandwidth) takes what storage evicts, serves hits of its own,
// and has its own count and results column.
func TestThreeTiers(t *testing.T) {
	c := tierConfig(8, 2)
	c.Deployments[0].KV.Offload = "eager"
	c.Deployments[0].KV.Tiers = append(c.Deployments[0].KV.Tiers,
		config.Tier{Name: "storage", CapacityBlocks: 2, BandwidthGBs: gbs(0.5), Latency: us(100), Eviction: "lru"},
		config.Tier{Name: "remote", CapacityBlocks: 100, BandwidthGBs: gbs(0.1), Latency: us(1000), Eviction: "lru"})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.TierNames(); !slices.Equal(got, []string{"cpu", "storage", "remote"}) {
		t.Fatalf("tier names %v", got)
	}
	a, b, x := req("a", 0, 64, 1), req("b", 2000, 128, 1), req("c", 5000, 64, 1)
	a.PrefixHashes = hashes(1, 2, 3, 4)
	b.PrefixHashes = hashes(100, 101, 102, 103, 104, 105, 106, 107)
	x.PrefixHashes = hashes(1, 2, 3, 4)
	sink, sum := run(t, c, []row.Request{a, b, x}, Options{CheckInvariants: true})
	r := sink.byID()["c"]
	if len(sum.TierNames) != 3 || sum.TierOffloads[2] == 0 || tierTok(r, 2) == 0 {
		t.Fatalf("nothing reached the third tier: offloads %v, result tiers %v", sum.TierOffloads, r.CachedTokensTier)
	}
	if tierTok(r, 0)+tierTok(r, 1)+tierTok(r, 2)+r.CachedTokensGPU != r.CachedTokens {
		t.Fatalf("cached %d != gpu %d + tiers %v", r.CachedTokens, r.CachedTokensGPU, r.CachedTokensTier)
	}
}

func TestKVConfigErrors(t *testing.T) {
	base := `deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
`
	for _, tc := range []struct{ name, yaml, want string }{
		{"decode without prefill", base + "    pools: [{role: decode, replicas: 2}]\n", "c.yaml:5: deployments[0].pools: a decode pool needs a prefill pool"},
		{"prefill without decode", base + "    pools: [{role: prefill, replicas: 2}]\n", "a prefill pool needs a decode pool"},
		{"bad role", base + "    pools: [{role: prefil, replicas: 2}]\n", "c.yaml:5: deployments[0].pools[0].role: did you mean prefill? (expected monolithic, prefill, decode or encode, found \"prefil\")"},
		{"zero transfer bandwidth", base + "    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 1}]\n    kv_transfer: {bandwidth_gb_s: 0}\n", "c.yaml:6: deployments[0].kv_transfer.bandwidth_gb_s: expected a finite bandwidth > 0"},
		{"zero tier bandwidth", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv:\n      tiers: [{name: cpu, capacity_gib: 10, bandwidth_gb_s: 0}]\n", "c.yaml:7: deployments[0].kv.tiers[0].bandwidth_gb_s: expected a finite bandwidth > 0"},
		{"cpu tier too large", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv:\n      tiers: [{name: cpu, capacity_gib: 100000}]\n", "deployments[0].kv.tiers[0].capacity_gib: 100000 GiB of cpu per replica is more than a machine plausibly has (at most 4096 GiB)"},
		{"tier without defaults", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv:\n      tiers: [{name: ssd, capacity_gib: 1}]\n", "deployments[0].kv.tiers[0]: a tier named ssd has no default bandwidth (the tiers with defaults: cpu, storage): set bandwidth_gb_s"},
		{"bad tier name", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv:\n      tiers: [{name: CXL-1, capacity_gib: 1, bandwidth_gb_s: 64}]\n", `deployments[0].kv.tiers[0].name: expected a name of lower-case letters, digits and _ (not gpu; e.g. cpu, storage), found "CXL-1"`},
		{"tier named gpu", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv:\n      tiers: [{name: gpu, capacity_gib: 1, bandwidth_gb_s: 64}]\n", `tiers[0].name: expected a name of lower-case letters`},
		{"tier twice", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv:\n      tiers: [{name: cpu, capacity_gib: 1}, {name: cpu, capacity_gib: 2}]\n", "deployments[0].kv.tiers[1].name: tier cpu is listed twice"},
		{"bad offload", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv: {offload: sometimes}\n", "c.yaml:6: deployments[0].kv.offload: expected none, eager, lazy or threshold"},
		{"unknown key", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv: {ofload: lazy}\n", "deployments[0].kv.ofload: unknown key; did you mean offload?"},
		{"transfer on monolithic", base + "    pools: [{role: monolithic, replicas: 1}]\n    kv_transfer: {latency: 5us}\n", "deployments[0].kv_transfer: only used by a deployment with prefill and decode pools"},
		{"bad granularity", base + "    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 1}]\n    kv_transfer: {granularity: layer}\n", "c.yaml:6: deployments[0].kv_transfer.granularity: expected block, chunk or stream, found \"layer\""},
		{"chunk with prefill-first", base + "    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 1}]\n    kv_transfer: {granularity: chunk, routing: prefill-first}\n", "deployments[0].kv_transfer.granularity: granularity chunk sends KV while the prefill runs"},
		{"bad layers", base + "    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 1}]\n    kv_transfer: {granularity: stream, layers: -1}\n", "deployments[0].kv_transfer.layers: expected the model's layer count (1 to 10000), found -1"},
		{"pipelined not a bool", base + "    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 1}]\n    kv_transfer: {pipelined: sometimes}\n", "pipelined"},
		{"mixed roles", base + "    pools: [{role: monolithic, replicas: 1}, {role: prefill, replicas: 1}, {role: decode, replicas: 1}]\n", "either monolithic or prefill/decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("c.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// pipelined and stream are accepted; Prepare reads the layer count from
	// the catalogue (Llama-3.1-8B: 32 layers).
	c, err := config.Parse("c.yaml", []byte(base+"    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 1}]\n    kv_transfer: {granularity: stream, pipelined: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(&c); err != nil || c.Deployments[0].KVTransfer.Layers != 32 {
		t.Fatalf("got %v, layers %d", err, c.Deployments[0].KVTransfer.Layers)
	}
	// A tier smaller than one block: Llama-3.1-8B holds 128 KiB of KV per
	// token, 2 MiB per block of 16.
	c, err = config.Parse("c.yaml", []byte(base+"    pools: [{role: monolithic, replicas: 1}]\n    kv:\n      tiers: [{name: cpu, capacity_gib: 0.001}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(&c); err == nil || !strings.Contains(err.Error(), "c.yaml:7: deployments[0].kv.tiers[0].capacity_gib: 0.001 GiB is less than one KV block") {
		t.Fatalf("got %v", err)
	}
}

// Prepare fills the tiers' and the transfer's defaults from the catalogue.
func TestKVDefaults(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(`deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    tp: 2
    pools: [{role: prefill, replicas: 1}, {role: decode, replicas: 3}]
    kv:
      tiers: [{name: cpu, capacity_gib: 64}, {name: storage, capacity_blocks: 1000000}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Prepare(&c); err != nil {
		t.Fatal(err)
	}
	d := c.Deployments[0]
	// 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B = 131,072 B per token.
	if d.KV.Offload != "lazy" || d.KV.BytesPerToken != 131072 || d.KV.Tiers[0].CapacityBlocks != 64<<30/(131072*16) ||
		*d.KV.Tiers[0].BandwidthGBs != 128 || d.KV.Tiers[0].Latency.US() != 10 || *d.KV.Tiers[1].BandwidthGBs != 5 || d.KV.Tiers[1].Latency.US() != 200 {
		t.Fatalf("kv %+v tiers %+v", d.KV, d.KV.Tiers)
	}
	x := d.KVTransfer
	if *x.BandwidthGBs != 100 || x.Latency.US() != 20 || x.Routing != "decode-first" || x.MaxQueue != 8 {
		t.Fatalf("kv_transfer %+v", x)
	}
	var _ latency.Model
}

// A fork of a P/D deployment with CPU tiers, taken mid-run (transfers and
// loads in flight), continues exactly as the original; and the same run
// twice gives the same results (determinism).
func TestTieredPDCloneAndDeterminism(t *testing.T) {
	reqs := workload(5, 300)
	for i := range reqs {
		if i%9 == 0 {
			reqs[i].TimeoutUS = 300_000
		}
	}
	for _, v := range []struct {
		routing, gran string
		pipelined     bool
	}{{"decode-first", "block", false}, {"prefill-first", "block", false}, {"decode-first", "chunk", false},
		{"decode-first", "stream", true}, {"prefill-first", "block", true}} {
		name := v.routing + "-" + v.gran
		if v.pipelined {
			name += "-pipelined"
		}
		t.Run(name, func(t *testing.T) {
			c := oneDeployment(testConfig(), config.Pool{Role: "prefill", Replicas: 2}, config.Pool{Role: "decode", Replicas: 2})
			d := &c.Deployments[0]
			d.Engine.KVBlocks = 120
			d.Engine.MaxNumBatchedTokens = 512
			d.KV = &config.KV{Offload: "lazy", BytesPerToken: 2000, Tiers: []config.Tier{
				{Name: "cpu", CapacityBlocks: 60, BandwidthGBs: gbs(0.5), Latency: us(30), Eviction: "lru"},
				{Name: "storage", CapacityBlocks: 200, BandwidthGBs: gbs(0.1), Latency: us(100), Eviction: "lfu"}}}
			d.KVTransfer = &config.KVTransfer{Link: "rdma", BandwidthGBs: gbs(0.2), Latency: us(20), Granularity: v.gran, Routing: v.routing, MaxQueue: 2,
				Pipelined: v.pipelined, Layers: 8}
			c.Router.Routing = "least-loaded"
			opts := Options{CheckInvariants: true}
			straight := &memSink{}
			sum, err := Run(c, testModel(c), SliceSource(reqs), straight, opts)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Transfers == 0 || sum.TierLoads[0] == 0 {
				t.Fatalf("the workload exercises nothing: %+v", sum)
			}
			again := &memSink{}
			if _, err := Run(c, testModel(c), SliceSource(reqs), again, opts); err != nil || !reflect.DeepEqual(again.rs, straight.rs) {
				t.Fatalf("a second run differs (%v)", err)
			}
			for _, at := range []int64{300_000, 1_500_000, 3_000_000} {
				orig := &memSink{}
				cl, f := start(t, c, reqs, orig, opts)
				checkFork(t, cl, f, orig, straight, at)
			}
		})
	}
}

// Round-robin keeps one turn per pool: with 2 prefill and 3 decode
// replicas, 6 requests go to each prefill replica 3 times and each decode
// replica twice (one shared turn sent every prefill to the same replica).
func TestPDRoundRobinPerPool(t *testing.T) {
	c := oneDeployment(testConfig(), config.Pool{Role: "prefill", Replicas: 2}, config.Pool{Role: "decode", Replicas: 3})
	c.Deployments[0].KVTransfer = &config.KVTransfer{Link: "rdma", BandwidthGBs: gbs(1), Latency: us(20), Granularity: "block", Routing: "decode-first", MaxQueue: 8}
	var reqs []row.Request
	for i := 0; i < 6; i++ {
		reqs = append(reqs, req(string(rune('a'+i)), int64(i)*100_000, 50, 3))
	}
	sink, _ := run(t, c, reqs, Options{})
	pre, dec := map[string]int{}, map[string]int{}
	for _, r := range sink.rs {
		pre[r.PrefillReplica]++
		dec[r.DecodeReplica]++
	}
	if pre["d/0"] != 3 || pre["d/1"] != 3 || dec["d/2"] != 2 || dec["d/3"] != 2 || dec["d/4"] != 2 {
		t.Fatalf("prefill %v decode %v", pre, dec)
	}
}

// A long prompt in three chunks on a P/D deployment, with each granularity
// and pipelining off and on: TTFT = the prefill's end + the transfer's
// exposed part + the first decode-side step (hand-computed, docs/engine.md
// "KV transfer").
func TestPDGranularityPipelined(t *testing.T) {
	// Prefill chunks of 400, 400, 200 tokens (budget 400): steps of 1400,
	// 1400 and 1200 µs, so the prefill runs [0,1400] [1400,2800]
	// [2800,4000]. KV: 1000 B per token at 0.5 GB/s = 2 µs per token;
	// latency 20 µs; L = 4 layers. First decode-side step: 1000 + 1 = 1001
	// (so pipelining may start it (L−1)·1001/L = 750 µs before the last
	// byte arrives).
	const prefillEnd, first = 4000, 1001
	cases := []struct {
		gran      string
		pipelined bool
		done      int64 // last byte in place
		start     int64 // the decode replica's first step starts
	}{
		// block: everything after the prefill: [4000, 6000] + 20.
		{"block", false, 6020, 6020},
		// chunk: [1400,2200] [2800,3600] [4000,4400] + 20.
		{"chunk", false, 4420, 4420},
		// stream: chunk 1 from 350 (its first layer) to max(350+800,
		// 1400+200) = 1600; chunk 2 from max(1600, 1750) to max(2550,
		// 3000) = 3000; chunk 3 from max(3000, 3100) to max(3500, 4100)
		// = 4100; + 20.
		{"stream", false, 4120, 4120},
		// block, pipelined: the last (only) piece left [4000,6000], its
		// first layer at 4500: ready at max(4520, 6020 − 750) = 5270.
		{"block", true, 6020, 5270},
		// chunk, pipelined: last piece [4000,4400], first layer at 4100:
		// max(4120, 4420 − 750) = 4120.
		{"chunk", true, 4420, 4120},
		// stream, pipelined: last piece's first layer at 3100 + 100:
		// max(4000 (the prefill's end), 3220, 4120 − 750) = 4000.
		{"stream", true, 4120, 4000},
	}
	for _, tc := range cases {
		name := tc.gran
		if tc.pipelined {
			name += "-pipelined"
		}
		t.Run(name, func(t *testing.T) {
			c := pdConfig()
			c.Deployments[0].Engine.MaxNumBatchedTokens = 400
			x := c.Deployments[0].KVTransfer
			x.BandwidthGBs, x.Granularity, x.Pipelined, x.Layers = gbs(0.5), tc.gran, tc.pipelined, 4
			steps := &memSteps{}
			sink, sum := run(t, c, []row.Request{req("a", 0, 1000, 3)}, Options{Steps: steps})
			r := sink.rs[0]
			if r.Status != row.StatusCompleted || r.TTFTUS != tc.start+first || r.E2EUS != tc.start+first+2*1010 {
				t.Fatalf("got %s ttft %d e2e %d, want ttft %d", r.Status, r.TTFTUS, r.E2EUS, tc.start+first)
			}
			if r.KVTransferUS != tc.done-prefillEnd || r.KVTransferBytes != 1_000_000 || sum.TransferBytes != 1_000_000 || sum.Transfers != 1 {
				t.Fatalf("transfer %d µs (want %d), %d B, summary %+v", r.KVTransferUS, tc.done-prefillEnd, r.KVTransferBytes, sum)
			}
			if len(steps.ss) != 6 || steps.ss[2].StartUS+steps.ss[2].DurationUS != prefillEnd || steps.ss[3].Role != "decode" || steps.ss[3].StartUS != tc.start {
				t.Fatalf("steps %+v", steps.ss)
			}
		})
	}
}

// tierTok is a result's cached tokens from the run's lower tier i.
func tierTok(r row.Result, i int) int32 {
	if i < len(r.CachedTokensTier) {
		return r.CachedTokensTier[i]
	}
	return 0
}
