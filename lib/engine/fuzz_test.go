package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

// fuzzRequests decodes bytes into a small workload: 7 bytes per request
// (arrival step, input, output, dependency, kind, prefix group, priority).
func fuzzRequests(b []byte) []row.Request {
	var reqs []row.Request
	t := int64(0)
	for i := 0; i+7 <= len(b) && len(reqs) < 64; i += 7 {
		x := b[i : i+7]
		id := fmt.Sprint("q", len(reqs))
		r := row.NewRequest(id)
		r.InputTokens = int32(x[1])%200 + 1
		r.OutputTokens = int32(x[2]) % 120
		r.Priority = int32(x[6] % 3)
		if d := int(x[3]); d%4 == 0 && len(reqs) > 0 {
			r.DependsOn = []string{reqs[d/4%len(reqs)].ID}
			r.DelayUS = int64(x[0]) * 100
			if x[4]%5 == 0 {
				r.Kind = row.KindTool
			}
		} else {
			t += int64(x[0]) * 300
			r.ArrivalUS = t
		}
		if x[4]%7 == 1 {
			r.SourceStatus = row.SourceFailed
		}
		if x[6]%7 == 5 {
			r.TimeoutUS = int64(x[0])*150 + 1 // clients that give up, in any phase
		}
		if x[6]%11 == 3 {
			r.Model = "qwen3-32b" // served by the second deployment when there is one
		}
		g := uint64(x[5] % 4)
		for j := int32(0); j < r.InputTokens/16; j++ {
			h := g<<32 | uint64(j)
			if j >= int32(x[5]%8) {
				h |= uint64(len(reqs)+1) << 40
			}
			r.PrefixHashes = append(r.PrefixHashes, h)
		}
		reqs = append(reqs, r)
	}
	return reqs
}

func FuzzRun(f *testing.F) {
	f.Add([]byte("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01\x05\xff\x30\x00\x05\x02\x02"), uint8(30), uint8(0))
	f.Add([]byte("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02\x00\x90\x60\x01\x02\x03\x00"), uint8(12), uint8(1))
	// Autoscaled (kv ≥ 0x80): wait, redirect and immediate drains, from zero.
	f.Add([]byte("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01\x05\xff\x30\x00\x05\x02\x02\x30\xff\x70\x01\x02\x00\x01\x40\x90\x60\x01\x02\x03\x00"), uint8(0x80), uint8(1))
	f.Add([]byte("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02\x30\x90\x60\x01\x02\x03\x00\x20\x90\x60\x01\x02\x03\x00"), uint8(0x85), uint8(0x82))
	f.Add([]byte("\x10\x90\xff\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02"), uint8(0x87), uint8(2))
	// Gateway flow control (kv&0x08, routing&0x20): alone, with P/D, autoscaled.
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02\x00\x90\x60\x01\x02\x03\x00", 4)), uint8(0x0a), uint8(0x25))
	f.Add([]byte(strings.Repeat("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01\x05\xff\x30\x00\x05\x02\x02", 4)), uint8(0x49), uint8(0x66))
	f.Add([]byte(strings.Repeat("\x10\x90\xff\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02", 4)), uint8(0x8b), uint8(0x2b))
	// Speculative decoding (kv&0x10, routing&0x08): alone, with P/D, two deployments.
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x13), uint8(0x0a))
	f.Add([]byte(strings.Repeat("\x01\x40\xf0\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01", 4)), uint8(0x31), uint8(0x4b))
	f.Add([]byte(strings.Repeat("\x10\x90\xff\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x1a), uint8(0xa9))
	// DP/EP/PP on a roofline (kv&0x84 == 0x04, routing&0xd0 == 0x10).
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x05), uint8(0x15))
	f.Add([]byte(strings.Repeat("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01", 4)), uint8(0x0e), uint8(0x1c))
	// Holds at the router (routing%8 == 2: least-loaded-hold, 10 ms): alone,
	// behind flow control, autoscaled from zero, with P/D.
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x11), uint8(0x02))
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x1d), uint8(0x22))
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x9d), uint8(0x2a))
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x31), uint8(0x42))
	// LoRA (kv&0x02, routing&0x10): alone, with speculative decoding and P/D, two deployments.
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x02), uint8(0x11))
	f.Add([]byte(strings.Repeat("\x01\x40\xf0\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01", 4)), uint8(0x73), uint8(0x5a))
	f.Add([]byte(strings.Repeat("\x10\x90\xff\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01", 4)), uint8(0x1b), uint8(0x9d))
	f.Fuzz(func(t *testing.T, b []byte, kv uint8, routing uint8) {
		c, models, reqs := fuzzCase(t, b, kv, routing)
		sink := &memSink{}
		sum, err := Run(c, models, SliceSource(reqs), sink, Options{CheckInvariants: true})
		var re *row.RowError
		if errors.As(err, &re) {
			return
		}
		if err != nil && c.Router.Routing == "least-loaded-hold" && (strings.Contains(err.Error(), "in the decode pool of") || strings.Contains(err.Error(), "in the encode pool of")) {
			return // a hold when picking the decode or encode replica: not honoured there, an error by design
		}
		if err != nil {
			if testing.Verbose() {
				for _, r := range reqs {
					t.Logf("%s at=%d in=%d out=%d deps=%v delay=%d timeout=%d prio=%d model=%q", r.ID, r.ArrivalUS, r.InputTokens, r.OutputTokens, r.DependsOn, r.DelayUS, r.TimeoutUS, r.Priority, r.Model)
				}
			}
			t.Fatalf("%v\nconfig:\n%s", err, c.YAML())
		}
		if len(sink.rs) != len(reqs) || sum.Injected != int64(len(reqs)) {
			t.Fatalf("%d rows, %d results, summary %+v", len(reqs), len(sink.rs), sum)
		}
		if sum.Unfinished != 0 {
			t.Fatalf("no horizon but %d unfinished", sum.Unfinished)
		}
	})
}

// fuzzCase is FuzzRun's cluster and workload for its inputs: two small
// replicas (or two deployments, an autoscaled pool, tiers, P/D, gateway
// flow control, DP/EP/PP, speculative decoding) under
// priority scheduling, clients with timeouts, sessions and tool calls.
func fuzzCase(t *testing.T, b []byte, kv, routing uint8) (config.Cluster, []latency.Model, []row.Request) {
	t.Helper()
	reqs := fuzzRequests(b)
	for i := range reqs {
		reqs[i].NumImages = int32(i % 3) // encoded on an encode pool when there is one
	}
	c := testConfig()
	c.Replicas = 2
	c.Engine.KVBlocks = int64(kv%64) + 2
	c.Engine.MaxNumSeqs = 4
	c.Engine.MaxNumBatchedTokens = 64
	c.Engine.LongPrefillThreshold = int(kv % 3 * 16)
	c.Engine.SchedulingPolicy = "priority"
	c.Router.Priority = "request"
	// lora-affinity is fuzzed with adapters (fuzzLoRA); without them it is
	// least-loaded, and leaving it out keeps the seeds' routing%8.
	names := slices.DeleteFunc(policy.Names(policy.StageRouting), func(n string) bool { return n == "lora-affinity" })
	c.Router.Routing = names[int(routing)%len(names)]
	c.Latency.Alpha = []float64{10, 0.5, 2}
	c.Engine.AsyncScheduling = kv&0x40 != 0
	c.KVEventDelay = config.Duration([]int64{0, 1e6, 50e6}[int(kv>>2)%3]) // live, 1 ms, 50 ms (ns)
	models := testModel(c)
	if routing&0x80 != 0 {
		// Two deployments (the flat one and a second model).
		d := c.Resolved()[0]
		d.ID = "a"
		d2 := d
		d2.ID, d2.Model, d2.Aliases = "b", "qwen3-32b", nil
		d2.Engine.KVBlocks = int64(kv%32) + 4
		c.Deployments = []config.Deployment{d, d2}
		for i := range reqs {
			if reqs[i].Model == "" {
				reqs[i].Model = "llama-3.1-8b"
			}
		}
		models = append(models, models[0])
	}
	if kv&0x80 != 0 {
		// Autoscaled: replicas come and go within milliseconds.
		if c.IsFlat() {
			d := c.Resolved()[0]
			d.ID = "a"
			c.Deployments = []config.Deployment{d}
		}
		a := config.DefaultAutoscaler()
		a.Policy = []string{"hpa", "queue-threshold", "slo"}[int(routing)%3]
		a.Target, a.Low = 2, 0.5
		if a.Policy == "slo" {
			a.Target = 0.9
		}
		a.SLO.TTFT = config.Duration(3e6) // 3 ms
		a.Interval, a.Sample, a.Window = config.Duration(2e6), config.Duration(1e6), config.Duration(4e6)
		a.Stabilization.Down = config.Duration(int64(kv%4) * 1e6)
		a.Provisioning = config.Distribution{Dist: "uniform", Max: config.Duration(3e6)}
		a.WeightLoad.Time = config.Duration(1e6)
		a.Warmup = config.Warmup{Curve: "linear", Duration: config.Duration(2e6), InitialFactor: 2}
		a.Drain = config.Drain{Mode: []string{"immediate", "wait", "redirect"}[int(kv)%3], Timeout: config.Duration(int64(kv%5) * 1e6)}
		a.Triggers.QueueDepthAbove = 3
		a.ScaleToZero = kv&1 != 0
		p := &c.Deployments[0].Pools[0]
		p.Autoscaler, p.MaxReplicas = &a, 3
		if a.ScaleToZero {
			p.Replicas = int(kv>>1) % 2
		}
		if routing&0x40 != 0 && len(c.Deployments) == 1 {
			// P/D with both pools autoscaled, each on its own (the
			// planner too), the decode pool from zero at times.
			c = fuzzAutoscaledPD(c, kv, routing)
		}
	} else if routing&0x80 == 0 && (kv&0x20 != 0 || routing&0x40 != 0) {
		// Tiered KV and/or P/D on one deployment.
		c = fuzzTiered(c, kv, routing)
	}
	if kv&0x08 != 0 && routing&0x20 != 0 {
		c = fuzzGateway(c, reqs, kv, routing)
	}
	if kv&0x84 == 0x04 && routing&0xd0 == 0x10 {
		c, models = fuzzParallel(t, c, kv, routing)
	}
	if kv&0x10 != 0 && routing&0x08 != 0 {
		c, models = fuzzSpec(c, models, reqs, kv, routing)
	}
	if kv&0x02 != 0 && routing&0x10 != 0 {
		c, models = fuzzLoRA(c, models, reqs, kv, routing)
	}
	if kv&0x01 != 0 && c.IsFlat() {
		// A model with sliding-window layers: vLLM's hybrid KV cache
		// manager (its step model stays the linear one, or FuzzLeap's).
		c.Model = "gpt-oss-120b"
	}
	// The engine runs configs validated where they were read.
	if err := c.Validate(); err != nil {
		t.Fatalf("the generated config is invalid: %v", err)
	}
	for _, ref := range c.OwnPools() {
		// A pool with hardware of its own: its linear model.
		l := c.Deployments[ref.Dep].Latency
		if p := c.Deployments[ref.Dep].Pools[ref.Pool]; p.Latency != nil {
			l = *p.Latency
		}
		m, _ := linearModel(&l)
		models = append(models, m)
	}
	return c, models, reqs
}

// fuzzParallel serves the fuzz workload from a MoE (or dense) model's
// roofline with data, expert and pipeline parallelism: dp 1, 2 or 4 ranks
// of tp 1 or 2, EP on or off, pp 1 or 2, any all-to-all backend.
func fuzzParallel(t *testing.T, c config.Cluster, kv, routing uint8) (config.Cluster, []latency.Model) {
	d := c.Resolved()[0]
	d.ID = "moe"
	d.Model = []string{"qwen3-30b-a3b", "deepseek-v2-lite", "mixtral-8x7b", "llama-3.1-8b"}[int(kv>>3)%4]
	d.GPU, d.TP = "h100", 1<<(routing%2)
	p := config.DefaultParallel()
	p.DP = 1 << (int(kv) % 3)
	p.ExpertParallel = d.Model != "llama-3.1-8b" && routing&0x04 != 0
	p.PP = 1 + int(routing>>3)%2
	p.All2AllBackend = roofline.All2AllBackends[int(routing>>5)%3]
	p.GPUsPerNode = 1 + int(kv>>5)%4
	d.Parallel = &p
	d.Latency = config.Latency{Mode: "roofline", Alpha: d.Latency.Alpha}
	d.Pools = []config.Pool{{Role: "monolithic", Replicas: p.DP}}
	d.Encode = nil // its pools replace an encode pool fuzzTiered added
	c.Deployments = []config.Deployment{d}
	models, _, err := Prepare(&c)
	if err != nil {
		t.Fatalf("parallel config %+v: %v", p, err)
	}
	return c, models
}

// fuzzGateway puts flow control in front of the fuzz config (and, now and
// then, a gateway admission template): any detector, ordering and fairness,
// TTLs, tiny queues and bands, live or snapshot views; requests get
// tenants, SLO classes and negative (sheddable) priorities.
func fuzzGateway(c config.Cluster, reqs []row.Request, kv, routing uint8) config.Cluster {
	fc := config.DefaultFlowControl()
	fc.Saturation.Detector = config.FlowDetectors[int(kv>>1)%2]
	fc.Saturation.QueueDepth = float64(kv%3) + 0.5
	fc.Saturation.KVCache = []float64{0.3, 0.8, 1}[int(routing)%3]
	fc.Saturation.MaxConcurrency = int(routing%2) + 1
	fc.Ordering = config.FlowOrderings[int(routing>>2)%3]
	if fc.Ordering == "slo-deadline" {
		fc.SLOTTFT = map[string]config.Duration{"a": config.Duration(2e6), "b": config.Duration(20e6)}
	}
	fc.Fairness = config.FlowFairness[int(kv>>2)%2]
	fc.TTL = config.Duration(int64(routing%5) * 2e6)
	fc.MaxRequests = int(kv % 5)
	fc.MaxTokens = int64(kv%3) * 200
	fc.Bands = []config.Band{{Priority: -1, MaxRequests: int(routing % 2)}, {Priority: 2, MaxTokens: 300}}
	c.Router.FlowControl = &fc
	if routing&0x02 != 0 {
		c.SnapshotInterval = config.Duration(int64(1+kv%3) * 1e6) // the detector sees a snapshot
	}
	switch kv % 7 {
	case 1:
		c.Router.Admission, c.Router.AdmissionParams = "token-bucket", map[string]float64{"rate": 2000, "burst": 3, "delay": float64(kv>>4) - float64(kv>>5)*2}
	case 2:
		c.Router.Admission, c.Router.AdmissionParams = "tier-shed", map[string]float64{"queue_depth": 2, "step": 0.5}
	}
	for i := range reqs {
		reqs[i].Priority -= int32(i % 2)
		reqs[i].TenantID = []string{"", "t1", "t2"}[i%3]
		reqs[i].SLOClass = []string{"a", "b", ""}[i%3]
	}
	return c
}

// fuzzTiered turns the fuzz config into one deployment with lower KV tiers
// (offload policy and eviction order from kv), and with prefill/decode
// pools when routing says so.
func fuzzTiered(c config.Cluster, kv, routing uint8) config.Cluster {
	pools := []config.Pool{{Role: "monolithic", Replicas: 2}}
	pd := routing&0x40 != 0
	if pd {
		pools = []config.Pool{{Role: "prefill", Replicas: 1 + int(kv>>4&1)}, {Role: "decode", Replicas: 1 + int(routing>>5&1)}}
	}
	c = oneDeployment(c, pools...)
	d := &c.Deployments[0]
	evs := []string{"lru", "lfu", "priority"}
	offs := []string{"none", "eager", "lazy", "threshold"}
	if kv&0x20 != 0 {
		d.KV = &config.KV{Offload: offs[int(kv)%4], Threshold: 0.5, BytesPerToken: 100, Tiers: []config.Tier{
			{Name: "cpu", CapacityBlocks: int64(kv%5) + 1, BandwidthGBs: gbs(0.1), Latency: us(int64(kv % 7)), Eviction: evs[int(kv)%3]}}}
		if kv&0x10 != 0 {
			d.KV.Tiers = append(d.KV.Tiers, config.Tier{Name: "storage", CapacityBlocks: int64(kv%9) + 1, BandwidthGBs: gbs(0.02), Latency: us(50), Eviction: evs[int(routing)%3]})
		}
	}
	if pd {
		fuzzPDKeys(d, kv, routing)
	}
	if routing&0x08 != 0 {
		// E/P/D: an encode pool before the prefill (or monolithic) pool.
		d.Pools = append([]config.Pool{{Role: "encode", Replicas: 1 + int(kv&1),
			Latency: &config.Latency{Mode: "linear", Beta: []float64{1, 0, 0}, ImageEncodeUS: float64(kv%4) * 50}}}, d.Pools...)
		if kv%4 == 0 {
			d.Pools[0].Latency.ImageEncodeUS = 1
		}
		bw := gbs(0.01)
		d.Encode = &config.Encode{TokensPerImage: 4, BytesPerToken: 100, Link: "rdma", BandwidthGBs: bw, Latency: us(int64(routing % 7))}
	}
	return c
}

// fuzzPDKeys gives P/D deployment d a KV transfer (granularity, pipelining,
// routing, fair or fifo links), a decider, and a prefill pool with
// hardware of its own (engine limits, KV size, linear model) at times.
func fuzzPDKeys(d *config.Deployment, kv, routing uint8) {
	routings := []string{"decode-first", "prefill-first"}
	x := &config.KVTransfer{Link: "rdma", BandwidthGBs: gbs(0.05), Latency: us(int64(routing % 30)),
		Granularity: "block", Routing: routings[int(kv>>3)&1], MaxQueue: int(routing%3) + 1,
		Pipelined: kv&2 != 0, Layers: 1 + int(routing/3)%5, Sharing: "fifo"}
	d.KVTransfer = x
	if x.Routing == "decode-first" {
		// chunk and stream reserve the decode blocks at the prefill's start.
		x.Granularity = []string{"block", "chunk", "stream"}[int(routing/15)%3]
		// A decider, chosen per request after the decode replica.
		d.PD = &config.PD{Decider: config.PDDeciders[int(kv/5)%3], Threshold: int(kv%4) * 32, MaxPrefillQueue: int(routing % 3)}
	}
	if x.Granularity != "stream" && !x.Pipelined && routing&4 != 0 {
		x.Sharing = "fair"
	}
	if kv&4 != 0 {
		e := d.Engine
		e.KVBlocks, e.MaxNumSeqs = d.Engine.KVBlocks+int64(kv%7), 2+int(routing%3)
		d.Pools[0].Engine = &e
		d.Pools[0].Latency = &config.Latency{Mode: "linear", Beta: []float64{500, 2, 20}}
	}
}

// fuzzAutoscaledPD turns the autoscaled fuzz config's one pool into a
// prefill pool and adds a decode pool, each with its own autoscaler.
func fuzzAutoscaledPD(c config.Cluster, kv, routing uint8) config.Cluster {
	d := &c.Deployments[0]
	pre := d.Pools[0]
	pre.Role = "prefill"
	a := *pre.Autoscaler
	a.SLO.ITL = config.Duration(5e6)
	if routing&8 != 0 {
		a.Policy = "planner"
	}
	pre.Autoscaler = &a
	dec := pre
	dec.Role = "decode"
	b := a
	b.ScaleToZero = kv&2 != 0
	b.Drain.Mode = []string{"immediate", "wait", "redirect"}[int(routing/3)%3]
	dec.Autoscaler = &b
	dec.Replicas = int(kv>>2) % 2
	if !b.ScaleToZero && dec.Replicas == 0 {
		dec.Replicas = 1
	}
	d.Pools = []config.Pool{pre, dec}
	d.KV = &config.KV{Offload: "none", BytesPerToken: 100}
	fuzzPDKeys(d, kv, routing)
	return c
}

// fuzzSpec turns on speculative decoding in every deployment: 1 to 4
// drafts, any acceptance (per SLO class too), disable_by_batch_size off or
// 1 to 3, n-gram (no draft cost) or a fixed draft pass.
func fuzzSpec(c config.Cluster, models []latency.Model, reqs []row.Request, kv, routing uint8) (config.Cluster, []latency.Model) {
	s := &config.Speculative{Method: config.SpecNgram, NumSpeculativeTokens: 1 + int(kv>>5)%4,
		AcceptanceRate: float64(routing%5) / 4, DisableByBatchSize: int(kv) % 4}
	if routing&0x02 != 0 {
		s.Method, s.DraftStepUS = config.SpecEagle, float64(kv%7)*10
	}
	if kv&0x01 != 0 {
		s.AcceptanceByClass = map[string]float64{"a": 1, "b": 0}
		for i := range reqs {
			reqs[i].SLOClass = []string{"a", "b", ""}[i%3]
		}
	}
	if c.IsFlat() {
		c.Speculative = s
	} else {
		for i := range c.Deployments {
			c.Deployments[i].Speculative = s
		}
	}
	out := make([]latency.Model, len(models))
	for i, m := range models {
		sm := &latency.Speculative{Target: m}
		if s.DraftStepUS > 0 {
			sm.Draft = &latency.Linear{Beta0: s.DraftStepUS}
		}
		out[i] = sm
	}
	return c, out
}

// fuzzLoRA gives every deployment 1 to 5 adapters with 1 to 3 slots (and
// now and then a host-memory cache), loads of 0 to 6 ms and a kernel cost,
// and the requests adapters (or the base model); routing by lora-affinity
// now and then.
func fuzzLoRA(c config.Cluster, models []latency.Model, reqs []row.Request, kv, routing uint8) (config.Cluster, []latency.Model) {
	n := 1 + int(kv>>2)%5
	l := &config.LoRA{MaxLoras: 1 + int(routing>>5)%3, MaxLoraRank: 64, HostGBps: 1, StorageGBps: 0.5}
	if kv&0x01 != 0 {
		l.MaxCPULoras = l.MaxLoras + int(kv>>4)%2
	}
	for i := 0; i < n; i++ {
		l.Adapters = append(l.Adapters, config.Adapter{Name: fmt.Sprintf("a%d", i), Rank: 8 << (i % 4),
			Bytes: int64(i%4) * 2e6, FLOPs: int64(i+1) * 1e4})
	}
	for i := range reqs {
		if k := (i + int(routing)) % (n + 1); k < n {
			reqs[i].LoRA = l.Adapters[k].Name
		}
	}
	if routing&0x04 != 0 {
		c.Router.Routing = "lora-affinity"
	}
	if c.IsFlat() {
		c.LoRA = l
	} else {
		for i := range c.Deployments {
			c.Deployments[i].LoRA = l
		}
	}
	out := make([]latency.Model, len(models))
	for i, m := range models {
		out[i] = &latency.LoRA{Base: m, FLOPsPerUS: 1e3, BytesPerUS: 1e4}
	}
	return c, out
}
