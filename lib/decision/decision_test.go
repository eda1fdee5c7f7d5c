package decision

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

type results struct{ rs []trace.Result }

func (m *results) Write(r *trace.Result) error { m.rs = append(m.rs, *r); return nil }

type decisions struct{ ds []trace.Decision }

func (m *decisions) Write(d *trace.Decision) error {
	x := *d
	x.Candidates = append([]trace.Candidate(nil), d.Candidates...)
	m.ds = append(m.ds, x)
	return nil
}

type anomalies struct{ as []trace.Anomaly }

func (m *anomalies) Write(a *trace.Anomaly) error {
	x := *a
	x.Requests = append([]string(nil), a.Requests...)
	m.as = append(m.as, x)
	return nil
}

func testConfig(replicas int, routing string) config.Cluster {
	c := config.Default()
	c.Replicas = replicas
	c.Engine.KVBlocks = 300
	c.Engine.MaxNumBatchedTokens = 512
	c.Router.Routing = routing
	c.Latency = config.Latency{Mode: "linear", Beta: []float64{1000, 1, 10}}
	return c
}

func workload(seed uint64, n int) []trace.Request {
	g := rng.New(seed, "test-workload")
	var reqs []trace.Request
	t := int64(0)
	for i := 0; i < n; i++ {
		t += int64(g.ExpFloat64() * 8000)
		in := int32(20 + g.IntN(600))
		r := trace.NewRequest(fmt.Sprint("s", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = t, in, int32(1+g.IntN(200))
		r.Priority = int32(g.IntN(3))
		r.SLOClass = []string{"interactive", "batch"}[g.IntN(2)]
		r.TenantID = []string{"a", "b", "c"}[g.IntN(3)]
		group := uint64(g.IntN(4))
		for j := int32(0); j < in/16; j++ {
			h := group*1000 + uint64(j)
			if j > 3 {
				h += uint64(i) * 1_000_000
			}
			r.PrefixHashes = append(r.PrefixHashes, h)
		}
		reqs = append(reqs, r)
	}
	return reqs
}

func simulate(t *testing.T, c config.Cluster, reqs []trace.Request, dc *Config) (*results, *Recorder) {
	t.Helper()
	return simulateWith(t, c, reqs, dc, cluster.Policies{})
}

// simulateWith is simulate with the run's policies.
func simulateWith(t *testing.T, c config.Cluster, reqs []trace.Request, dc *Config, pol cluster.Policies) (*results, *Recorder) {
	t.Helper()
	models, _, err := engine.Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	res := &results{}
	opts := engine.Options{CheckInvariants: true, Policies: pol}
	var sink engine.Sink = res
	var rec *Recorder
	if dc != nil {
		rec = New(*dc)
		rec.Attach(&opts)
		sink = rec.Sink(res)
	}
	if _, err := engine.Run(c, models, engine.SliceSource(reqs), sink, opts); err != nil {
		t.Fatal(err)
	}
	if rec != nil {
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return res, rec
}

// Tracing, anomaly detection and regret forks must not change the run.
func TestTracingLeavesResultsUnchanged(t *testing.T) {
	reqs := workload(3, 400)
	slos, _ := slo.Parse([]string{"interactive:ttft=50ms"})
	for _, routing := range []string{"round-robin", "least-loaded", "weighted", "prefix-affinity", "random"} {
		t.Run(routing, func(t *testing.T) {
			c := testConfig(3, routing)
			plain, _ := simulate(t, c, reqs, nil)
			ds, as := &decisions{}, &anomalies{}
			traced, rec := simulate(t, c, reqs, &Config{Level: Full, Decisions: ds, Anomalies: as, SLOs: slos,
				Regret: RegretConfig{Sample: 0.2, Seed: 1}})
			if !reflect.DeepEqual(plain.rs, traced.rs) {
				t.Fatal("tracing changed the results")
			}
			st := rec.Stats()
			if st.ByKind[trace.DecisionRouting] != int64(len(reqs)) || st.ByKind[trace.DecisionAdmission] != int64(len(reqs)) {
				t.Fatalf("rows by kind %v, want one admission and one routing row per request (%d)", st.ByKind, len(reqs))
			}
			if st.ByKind[trace.DecisionBatch] == 0 || st.RegretSamples == 0 {
				t.Fatalf("no batch rows or no regret samples: %+v", st)
			}
			// Same run again: byte-identical rows (determinism).
			ds2, as2 := &decisions{}, &anomalies{}
			simulate(t, c, reqs, &Config{Level: Full, Decisions: ds2, Anomalies: as2, SLOs: slos, Regret: RegretConfig{Sample: 0.2, Seed: 1}})
			// (NaN marks absent floats: compare the printed rows.)
			if fmt.Sprint(ds.ds) != fmt.Sprint(ds2.ds) || fmt.Sprint(as.as) != fmt.Sprint(as2.as) {
				t.Fatal("decisions or anomalies differ between two identical runs")
			}
			// Every routing row carries its outcome and k candidates, chosen first.
			for _, d := range ds.ds {
				if d.Kind != trace.DecisionRouting {
					continue
				}
				if len(d.Candidates) != 3 || d.Candidates[0].ReplicaID != d.Target {
					t.Fatalf("seq %d: candidates %+v, want 3 with the target %s first", d.Seq, d.Candidates, d.Target)
				}
				if d.Status == trace.StatusCompleted && d.TTFTUS == trace.Null {
					t.Fatalf("seq %d: completed without TTFT", d.Seq)
				}
				if d.RegretUS != trace.Null {
					best := int64(math.MaxInt64)
					for _, c := range d.Candidates[1:] {
						best = min(best, c.CFTTFTUS)
					}
					if d.RegretUS != d.Candidates[0].CFTTFTUS-best {
						t.Fatalf("seq %d: regret %d, want chosen %d − best %d", d.Seq, d.RegretUS, d.Candidates[0].CFTTFTUS, best)
					}
				}
			}
		})
	}
}

// The replay with the chosen replica forced is the run itself when nothing
// arrives after the decision: the last request's replayed TTFT is its
// actual TTFT, exactly.
func TestRegretReplayOfChosenIsExact(t *testing.T) {
	reqs := workload(5, 60)
	c := testConfig(2, "least-loaded")
	ds := &decisions{}
	res, _ := simulate(t, c, reqs, &Config{Level: Decisions, Decisions: ds, Regret: RegretConfig{Sample: 1, WindowUS: 60_000_000}})
	last := reqs[len(reqs)-1].ID
	var actual int64 = trace.Null
	for _, r := range res.rs {
		if r.ID == last {
			actual = r.TTFTUS
		}
	}
	for _, d := range ds.ds {
		if d.Kind == trace.DecisionRouting && d.RequestID == last {
			if got := d.Candidates[0].CFTTFTUS; got != actual || actual == trace.Null {
				t.Fatalf("replayed TTFT of the chosen replica %d, actual %d", got, actual)
			}
			if d.TTFTUS != actual {
				t.Fatalf("routing row TTFT %d, actual %d", d.TTFTUS, actual)
			}
			return
		}
	}
	t.Fatal("no routing row for the last request")
}

// TestShadowFromDelayedEvents: the shadow KV is what the router has heard
// of the replica's KV events, as late as it hears them. a's prompt is
// cached when its prefill ends (1.3 ms); b, routed 20 ms later with the
// same prompt, finds it cached, but with events 50 ms late the router had
// not heard of it: a shadow divergence (more cached than predicted). c,
// routed at 100 ms, is predicted right. With live events both are.
func TestShadowFromDelayedEvents(t *testing.T) {
	var reqs []trace.Request
	for i, at := range []int64{0, 20_000, 100_000} {
		r := trace.NewRequest(string(rune('a' + i)))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = at, 20*16+1, 2
		for b := uint64(0); b < 20; b++ {
			r.PrefixHashes = append(r.PrefixHashes, 7000+b)
		}
		reqs = append(reqs, r)
	}
	for _, tc := range []struct {
		delayUS  int64
		expected map[string]int32 // expected_cache_hit_tokens by request
		diverged int64
	}{
		{50_000, map[string]int32{"a": 0, "b": 0, "c": 320}, 1},
		{0, map[string]int32{"a": 0, "b": 320, "c": 320}, 0},
	} {
		c := testConfig(1, "prefix-affinity")
		c.KVEventDelay = config.Duration(tc.delayUS * 1000)
		ds, as := &decisions{}, &anomalies{}
		_, rec := simulate(t, c, reqs, &Config{Level: Decisions, Decisions: ds, Anomalies: as})
		for _, d := range ds.ds {
			if d.Kind != trace.DecisionRouting {
				continue
			}
			want := tc.expected[d.RequestID]
			if d.ExpectedCacheHitTokens != want || d.CachedBlocks*16 != want {
				t.Fatalf("delay %d µs, %s: expected %d cached tokens (cached_blocks %d), want %d", tc.delayUS, d.RequestID, d.ExpectedCacheHitTokens, d.CachedBlocks, want)
			}
			if d.RequestID != "a" && d.CacheHitTokens != 320 {
				t.Fatalf("delay %d µs, %s: actual hit %d, want 320", tc.delayUS, d.RequestID, d.CacheHitTokens)
			}
		}
		if st := rec.Stats(); st.ShadowDivergent != tc.diverged || st.Anomalies[trace.AnomalyShadowDivergence] != tc.diverged {
			t.Fatalf("delay %d µs: %d divergent, want %d", tc.delayUS, st.ShadowDivergent, tc.diverged)
		}
	}
}

// Hand-computed inversion and head-of-line blocking on one replica.
func TestRingDetectors(t *testing.T) {
	as := &anomalies{}
	r := New(Config{Anomalies: as})
	r.reps = make([]repState, 1)
	res := func(id string, prio, in int32, enq, sched, first int64) *trace.Result {
		x := trace.NewResult(trace.NewRequest(id))
		x.Priority, x.InputTokens, x.InstanceID = prio, in, 0
		x.EnqueuedUS, x.FirstScheduledUS, x.FirstTokenUS = enq, sched, first
		return &x
	}
	r.ringCheck(res("lo", 0, 10, 200, 300, 400))
	r.ringCheck(res("hi", 2, 10, 100, 500, 600))
	if len(as.as) != 1 || as.as[0].Type != trace.AnomalyPriorityInversion || as.as[0].Magnitude != 200 ||
		!reflect.DeepEqual(as.as[0].Requests, []string{"hi", "lo"}) {
		t.Fatalf("inversion: %+v", as.as)
	}
	// A 1,000-token prefill enqueued at 50 µs gives its first token at
	// 200,000; a 10-token request enqueued at 100 is scheduled at 200,100:
	// it waited 200,000 µs behind it.
	as.as = nil
	r.reps = make([]repState, 1)
	r.ringCheck(res("long", 0, 1000, 50, 60, 200_000))
	r.ringCheck(res("short", 0, 10, 100, 200_100, 210_000))
	if len(as.as) != 1 || as.as[0].Type != trace.AnomalyHeadOfLine || as.as[0].Magnitude != 200_000 {
		t.Fatalf("head of line: %+v", as.as)
	}
}

// A starved KV preempts in bursts: a storm.
func TestPreemptionStorm(t *testing.T) {
	c := testConfig(1, "round-robin")
	c.Engine.KVBlocks = 60
	var reqs []trace.Request
	for i := 0; i < 40; i++ {
		r := trace.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i), 100, 300
		reqs = append(reqs, r)
	}
	as := &anomalies{}
	_, rec := simulate(t, c, reqs, &Config{Anomalies: as, Thresholds: Thresholds{StormCount: 3, StormWindowUS: 1_000_000}})
	st := rec.Stats()
	if st.ByKind[trace.DecisionPreemption] == 0 || st.Anomalies[trace.AnomalyPreemptionStorm] == 0 {
		t.Fatalf("want preemptions and a storm, got %+v", st)
	}
	var n float64
	for _, a := range as.as {
		if a.Type == trace.AnomalyPreemptionStorm {
			n += a.Magnitude
		}
	}
	if int64(n) > st.ByKind[trace.DecisionPreemption] {
		t.Fatalf("storms count %v preemptions, more than the %d recorded", n, st.ByKind[trace.DecisionPreemption])
	}
}

// The hooks for features built in parallel: scale and KV-transfer rows
// and their anomalies go through the cluster to the recorder.
func TestParallelFeatureHooks(t *testing.T) {
	c := testConfig(2, "round-robin")
	models, _, err := engine.Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	ds, as := &decisions{}, &anomalies{}
	rec := New(Config{Level: Decisions, Decisions: ds, Anomalies: as})
	opts := cluster.Options{}
	rec.Attach(&opts)
	cl, err := cluster.New(&c, models, rec.Sink(&results{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	cl.TraceScale("llama-3.1-8b", "llama-3.1-8b/2", "scale_up", "queue above 10 for 30 s", 3)
	cl.ReportAnomaly(&trace.Anomaly{Type: trace.AnomalyScaleOscillation, Severity: "medium", Magnitude: 4, Description: "4 scale changes in 60 s"})
	if len(ds.ds) != 1 || ds.ds[0].Kind != trace.DecisionScale || ds.ds[0].Value != 3 || ds.ds[0].Target != "llama-3.1-8b/2" {
		t.Fatalf("scale row: %+v", ds.ds)
	}
	if len(as.as) != 1 || as.as[0].Type != trace.AnomalyScaleOscillation || rec.Stats().Anomalies[trace.AnomalyScaleOscillation] != 1 {
		t.Fatalf("anomaly: %+v", as.as)
	}
	// Untraced, the hooks are no-ops.
	plain, _ := cluster.New(&c, models, &results{}, cluster.Options{})
	plain.TraceScale("d", "r", "scale_up", "", 1)
	plain.ReportAnomaly(&trace.Anomaly{})
}
