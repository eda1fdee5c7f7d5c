package engine

import (
	"reflect"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
)

// gatewayConfig is one replica behind a gateway whose concurrency detector
// lets one request at a time onto it: linear steps of 1000 µs + 1 µs per
// prefill token + 10 µs per decode token, no α, synchronous scheduling.
// A request of 10 prompt tokens and 2 output tokens takes a prefill step
// of 1010 µs and a decode step of 1010 µs: it leaves 2020 µs after it was
// routed.
func gatewayConfig(f func(*config.FlowControl)) config.Cluster {
	c := testConfig()
	c.Engine.AsyncScheduling = false
	c.Engine.SchedulingPolicy = "priority"
	c.Router.Priority = "request"
	fc := config.DefaultFlowControl()
	fc.Saturation.Detector = "concurrency"
	fc.Saturation.MaxConcurrency = 1
	if f != nil {
		f(&fc)
	}
	c.Router.FlowControl = &fc
	return c
}

func greq(id string, at int64, prio int32, tenant string) row.Request {
	r := req(id, at, 10, 2)
	r.Priority, r.TenantID = prio, tenant
	return r
}

func TestGatewayHandComputed(t *testing.T) {
	type want struct {
		routed, finished int64
		status           string
		reason           string
	}
	for _, tc := range []struct {
		name  string
		fc    func(*config.FlowControl)
		reqs  []row.Request
		want  map[string]want
		queue int64 // Summary.GatewayQueued
		wait  int64 // Summary.GatewayWaitUS
	}{{
		// a is routed at once; b (priority 0) and c (priority 5, 100 µs
		// later) wait: c's band is served first when a leaves at 2020,
		// then b when c leaves at 4040.
		name: "strict priority",
		reqs: []row.Request{greq("a", 0, 0, ""), greq("b", 0, 0, ""), greq("c", 100, 5, "")},
		want: map[string]want{"a": {0, 2020, row.StatusCompleted, ""}, "c": {2020, 4040, row.StatusCompleted, ""},
			"b": {4040, 6060, row.StatusCompleted, ""}},
		queue: 2, wait: (2020 - 100) + 4040,
	}, {
		// TTL 1500 µs: b leaves the queue at 1500, c at 1600.
		name: "ttl",
		fc:   func(f *config.FlowControl) { f.TTL = config.Duration(1500e3) },
		reqs: []row.Request{greq("a", 0, 0, ""), greq("b", 0, 0, ""), greq("c", 100, 5, "")},
		want: map[string]want{"a": {0, 2020, row.StatusCompleted, ""}, "b": {row.Null, 1500, row.StatusRejected, "TTL"},
			"c": {row.Null, 1600, row.StatusRejected, "TTL"}},
		queue: 2, wait: 3000,
	}, {
		// One place in the queue: c (priority 0) sheds b (sheddable,
		// priority −1); d (priority −2) finds nothing below it to shed.
		name: "full queue sheds",
		fc:   func(f *config.FlowControl) { f.MaxRequests = 1 },
		reqs: []row.Request{greq("a", 0, 0, ""), greq("b", 0, -1, ""), greq("c", 10, 0, ""), greq("d", 20, -2, "")},
		want: map[string]want{"a": {0, 2020, row.StatusCompleted, ""}, "b": {row.Null, 10, row.StatusRejected, "shed"},
			"c": {2020, 4040, row.StatusCompleted, ""}, "d": {row.Null, 20, row.StatusRejected, "queue full"}},
		queue: 2, wait: 10 + 2010,
	}, {
		// A band of one request: the second of priority 3 is turned away.
		name: "band capacity",
		fc:   func(f *config.FlowControl) { f.Bands = []config.Band{{Priority: 3, MaxRequests: 1}} },
		reqs: []row.Request{greq("a", 0, 0, ""), greq("b", 0, 3, ""), greq("c", 10, 3, ""), greq("d", 20, 0, "")},
		want: map[string]want{"a": {0, 2020, row.StatusCompleted, ""}, "b": {2020, 4040, row.StatusCompleted, ""},
			"c": {row.Null, 10, row.StatusRejected, "band 3 full"}, "d": {4040, 6060, row.StatusCompleted, ""}},
		queue: 2, wait: 2020 + 4020,
	}, {
		// Global-strict FCFS serves x1 x2 x3 y1; round-robin alternates
		// tenants: x1 y1 x2 x3.
		name: "round-robin fairness",
		fc:   func(f *config.FlowControl) { f.Fairness = "round-robin" },
		reqs: []row.Request{greq("a", 0, 0, "x"), greq("x1", 1, 0, "x"), greq("x2", 2, 0, "x"), greq("x3", 3, 0, "x"), greq("y1", 4, 0, "y")},
		want: map[string]want{"x1": {2020, 4040, row.StatusCompleted, ""}, "y1": {4040, 6060, row.StatusCompleted, ""},
			"x2": {6060, 8080, row.StatusCompleted, ""}, "x3": {8080, 10100, row.StatusCompleted, ""}},
		queue: 4, wait: (2020 - 1) + (4040 - 4) + (6060 - 2) + (8080 - 3),
	}, {
		name: "global-strict fcfs",
		reqs: []row.Request{greq("a", 0, 0, "x"), greq("x1", 1, 0, "x"), greq("x2", 2, 0, "x"), greq("x3", 3, 0, "x"), greq("y1", 4, 0, "y")},
		want: map[string]want{"x1": {2020, 4040, row.StatusCompleted, ""}, "x2": {4040, 6060, row.StatusCompleted, ""},
			"x3": {6060, 8080, row.StatusCompleted, ""}, "y1": {8080, 10100, row.StatusCompleted, ""}},
		queue: 4, wait: (2020 - 1) + (4040 - 2) + (6060 - 3) + (8080 - 4),
	}, {
		// slo-deadline: c's class gives it the earliest deadline (5 + 1 ms),
		// then b (1 + 10 ms); d has no class: last.
		name: "slo-deadline",
		fc: func(f *config.FlowControl) {
			f.Ordering = "slo-deadline"
			f.SLOTTFT = map[string]config.Duration{"chat": config.Duration(1e6), "batch": config.Duration(10e6)}
		},
		reqs: func() []row.Request {
			rs := []row.Request{greq("a", 0, 0, ""), greq("d", 1, 0, ""), greq("b", 2, 0, ""), greq("c", 5, 0, "")}
			rs[2].SLOClass, rs[3].SLOClass = "batch", "chat"
			return rs
		}(),
		want: map[string]want{"c": {2020, 4040, row.StatusCompleted, ""}, "b": {4040, 6060, row.StatusCompleted, ""},
			"d": {6060, 8080, row.StatusCompleted, ""}},
		queue: 3, wait: (2020 - 5) + (4040 - 2) + (6060 - 1),
	}, {
		// edf: the client's deadline orders the queue (b: 1 + 9000,
		// c: 2 + 5000 µs).
		name: "edf",
		fc:   func(f *config.FlowControl) { f.Ordering = "edf" },
		reqs: func() []row.Request {
			rs := []row.Request{greq("a", 0, 0, ""), greq("b", 1, 0, ""), greq("c", 2, 0, "")}
			rs[1].TimeoutUS, rs[2].TimeoutUS = 9000, 5000
			return rs
		}(),
		want:  map[string]want{"c": {2020, 4040, row.StatusCompleted, ""}, "b": {4040, 6060, row.StatusCompleted, ""}},
		queue: 2, wait: (2020 - 2) + (4040 - 1),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := gatewayConfig(tc.fc)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			sink, sum := run(t, c, tc.reqs, Options{})
			got := map[string]*row.Result{}
			for i := range sink.rs {
				got[sink.rs[i].ID] = &sink.rs[i]
			}
			for id, w := range tc.want {
				r := got[id]
				if r == nil {
					t.Fatalf("no result for %s", id)
				}
				if r.Status != w.status || r.FinishedUS != w.finished || w.routed != row.Null && r.RoutedUS != w.routed || !strings.Contains(r.DropReason, w.reason) {
					t.Errorf("%s: status %s routed %d finished %d reason %q; want %s routed %d finished %d reason ~%q",
						id, r.Status, r.RoutedUS, r.FinishedUS, r.DropReason, w.status, w.routed, w.finished, w.reason)
				}
			}
			if sum.GatewayQueued != tc.queue || sum.GatewayWaitUS != tc.wait {
				t.Errorf("gateway queued %d waited %d µs, want %d and %d", sum.GatewayQueued, sum.GatewayWaitUS, tc.queue, tc.wait)
			}
		})
	}
}

// TestGatewayUtilizationDetector: llm-d's default detector with a queue
// depth of 1 lets a request through only while the replica's queue (waiting
// + in flight) is empty: b waits for a to leave the queue, which it does
// when its first step starts (at 0), and c waits for b's step (at 1010).
func TestGatewayUtilizationDetector(t *testing.T) {
	c := gatewayConfig(func(f *config.FlowControl) {
		f.Saturation = config.Saturation{Detector: "utilization", QueueDepth: 1, KVCache: 1, Limit: 1}
	})
	c.Engine.MaxNumSeqs = 1
	c.Engine.MaxNumBatchedTokens = 16
	sink, sum := run(t, c, []row.Request{greq("a", 0, 0, ""), greq("b", 0, 0, ""), greq("c", 0, 0, "")}, Options{})
	routed := map[string]int64{}
	for _, r := range sink.rs {
		routed[r.ID] = r.RoutedUS
	}
	// a runs 0–2020; b enters the queue at 0 (a left it when its step
	// started) and runs 2020–4040; c enters the queue once b left it.
	if routed["a"] != 0 || routed["b"] != 0 || routed["c"] != 2020 || sum.GatewayQueued != 2 {
		t.Fatalf("routed %v, queued %d", routed, sum.GatewayQueued)
	}
}

// TestGatewayOffIsUnchanged: a run without flow control and one with a
// detector that is never saturated give the same results.
func TestGatewayNeverSaturatedIsUnchanged(t *testing.T) {
	var reqs []row.Request
	for i := 0; i < 200; i++ {
		r := req(string(rune('a'+i%26))+string(rune('0'+i/26)), int64(i)*700, int32(50+i%300), int32(5+i%40))
		r.Priority = int32(i % 3)
		reqs = append(reqs, r)
	}
	c := testConfig()
	c.Replicas = 3
	c.Router.Routing = "least-loaded"
	plain, _ := run(t, c, reqs, Options{})
	fc := config.DefaultFlowControl()
	fc.Saturation.QueueDepth = 1e9
	fc.Saturation.KVCache = 1
	fc.Saturation.Limit = 1e9
	c.Router.FlowControl = &fc
	gated, sum := run(t, c, reqs, Options{})
	if sum.GatewayQueued != 0 {
		t.Fatalf("%d requests queued", sum.GatewayQueued)
	}
	for i := range plain.rs {
		if !reflect.DeepEqual(plain.rs[i], gated.rs[i]) {
			t.Fatalf("result %d differs:\n%+v\n%+v", i, plain.rs[i], gated.rs[i])
		}
	}
}

// TestGatewayCloneContinuesIdentically: a fork taken while requests wait at
// the gateway (round-robin between tenants, edf, a TTL, a bounded
// sheddable band) writes exactly what the original writes after it.
func TestGatewayCloneContinuesIdentically(t *testing.T) {
	reqs := workload(11, 300)
	for i := range reqs {
		reqs[i].TenantID = []string{"x", "y", "z"}[i%3]
		reqs[i].Priority = int32(i%3) - 1
		if i%5 == 0 {
			reqs[i].TimeoutUS = 300_000
		}
	}
	c := testConfig()
	c.Replicas = 2
	c.Engine.KVBlocks = 150
	c.Engine.MaxNumBatchedTokens = 512
	c.Router.Priority = "request"
	fc := config.DefaultFlowControl()
	fc.Saturation = config.Saturation{Detector: "utilization", QueueDepth: 1, KVCache: 0.5, MaxConcurrency: 1, Limit: 1}
	fc.Ordering, fc.Fairness, fc.TTL, fc.MaxRequests = "edf", "round-robin", config.Duration(200e6), 20
	fc.Bands = []config.Band{{Priority: -1, MaxRequests: 5}}
	c.Router.FlowControl = &fc
	opts := Options{CheckInvariants: true}
	straight := &memSink{}
	sum, err := Run(c, testModel(c), SliceSource(reqs), straight, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.GatewayQueued == 0 || sum.GatewayShed+sum.GatewayFull+sum.GatewayExpired == 0 {
		t.Fatalf("the gateway did too little to test: %+v", sum)
	}
	for _, at := range []int64{500_000, 2_000_000, 4_000_000} {
		orig := &memSink{}
		cl, f := start(t, c, reqs, orig, opts)
		checkFork(t, cl, f, orig, straight, at)
	}
}

// TestGatewaySnapshotView: with a snapshot interval the detector sees the
// replicas as of the last snapshot, so a request waits at least until the
// snapshot after a leaves (at 2020 µs: the one at 3000), even when no
// other event comes then.
func TestGatewaySnapshotView(t *testing.T) {
	c := gatewayConfig(nil)
	c.SnapshotInterval = config.Duration(1e6) // 1 ms
	sink, sum := run(t, c, []row.Request{greq("a", 0, 0, ""), greq("b", 0, 0, "")}, Options{})
	routed := map[string]int64{}
	for _, r := range sink.rs {
		routed[r.ID] = r.RoutedUS
	}
	if routed["a"] != 0 || routed["b"] != 3000 || sum.GatewayQueued != 1 {
		t.Fatalf("routed %v, queued %d", routed, sum.GatewayQueued)
	}
}
