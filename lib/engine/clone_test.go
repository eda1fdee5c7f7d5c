package engine

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
)

// TestCloneContinuesIdentically forks a cluster mid-run: the fork, run to
// the end, writes exactly the results the original writes after the fork,
// and running the fork first leaves the original unchanged (no shared
// state) — what counterfactual replays rely on.
func TestCloneContinuesIdentically(t *testing.T) {
	reqs := workload(7, 300)
	for i := range reqs {
		if i%7 == 0 {
			reqs[i].TimeoutUS = 400_000
		}
	}
	for _, routing := range []string{"prefix-affinity", "random", "least-loaded", "least-loaded/max-in-flight"} {
		for _, index := range []int{-1, 1} {
			t.Run(fmt.Sprintf("%s/index%d", routing, index), func(t *testing.T) {
				maxInFlight := 0
				if r, ok := strings.CutSuffix(routing, "/max-in-flight"); ok {
					routing, maxInFlight = r, 6 // the client holds requests back: its queue is cloned too
				}
				c := testConfig()
				c.Replicas = 3
				c.Engine.KVBlocks = 150
				c.Engine.MaxNumBatchedTokens = 512
				c.Router.Routing = routing
				opts := Options{CheckInvariants: true, RouterIndexes: index, MaxInFlight: maxInFlight}
				straight := &memSink{}
				if _, err := Run(c, testModel(c), SliceSource(reqs), straight, opts); err != nil {
					t.Fatal(err)
				}
				if maxInFlight > 0 {
					waited := 0
					for _, r := range straight.rs {
						if r.ClientWaitUS > 0 {
							waited++
						}
					}
					if waited == 0 {
						t.Fatal("no request waited for the client: the case tests nothing")
					}
				}
				for _, at := range []int64{0, 500_000, 2_000_000, 4_000_000} {
					orig := &memSink{}
					cl, f := start(t, c, reqs, orig, opts)
					checkFork(t, cl, f, orig, straight, at)
				}
			})
		}
	}
}

// checkFork runs cl to at, forks it there and finishes both: the original
// must still write straight's results, and the fork the ones the original
// wrote after the fork (a fork shares no state with its original).
func checkFork(t *testing.T, cl *cluster.Cluster, f *feeder, orig, straight *memSink, at int64) {
	t.Helper()
	runUntil(t, cl, f, at)
	before := len(orig.rs)
	forked := &memSink{}
	fork := cl.Clone(forked, nil)
	ff := *f // an in-memory table's feeder is a position in it
	ff.c = fork
	finish(t, fork, &ff)
	finish(t, cl, f)
	if !reflect.DeepEqual(orig.rs, straight.rs) {
		t.Fatalf("fork at %d µs: the original's results changed", at)
	}
	if !reflect.DeepEqual(forked.rs, straight.rs[before:]) {
		t.Fatalf("fork at %d µs: the fork wrote %d results, want the %d after the fork", at, len(forked.rs), len(straight.rs)-before)
	}
}

func start(t *testing.T, c config.Cluster, reqs []row.Request, sink Sink, opts Options) (*cluster.Cluster, *feeder) {
	t.Helper()
	cl, err := cluster.New(&c, testModel(c), sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &feeder{c: cl, lastRoot: math.MinInt64}
	if err := f.preloadAll(&sliceSource{reqs: reqs}); err != nil {
		t.Fatal(err)
	}
	return cl, f
}

// runUntil advances cl to t, reading input when it asks.
func runUntil(t *testing.T, cl *cluster.Cluster, f *feeder, at int64) {
	t.Helper()
	for cl.RunUntil(at) == cluster.NeedInput {
		if err := f.readNextRoot(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Err(); err != nil {
		t.Fatal(err)
	}
}

func finish(t *testing.T, cl *cluster.Cluster, f *feeder) {
	t.Helper()
	runUntil(t, cl, f, math.MaxInt64)
	if _, err := cl.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestRouterIndexesMatchScans routes with the router's indexes (global
// prefix index, load tree) and with plain scans of every candidate: same
// decisions, same results, on small and large groups.
func TestRouterIndexesMatchScans(t *testing.T) {
	for _, replicas := range []int{5, 40} {
		reqs := workload(11, 120*replicas)
		for _, routing := range []string{"prefix-affinity", "weighted", "least-loaded"} {
			for _, kv := range []int64{80, 1000} { // heavy eviction, and none
				c := testConfig()
				c.Replicas = replicas
				c.Engine.KVBlocks = kv
				c.Router.Routing = routing
				var out [3][]byte
				for i, index := range []int{-1, 1, 0} {
					out[i] = resultsBytesOpts(t, c, reqs, Options{CheckInvariants: true, RouterIndexes: index})
				}
				if string(out[0]) != string(out[1]) || string(out[0]) != string(out[2]) {
					t.Fatalf("%d replicas %s kv=%d: the router's indexes changed the results", replicas, routing, kv)
				}
			}
		}
	}
}

// TestCloneWithBundle forks a run whose policy bundle keeps state —
// Starlark state dicts, a seeded random stream, router state read by a
// tree, a Starlark scheduler — and checks the fork continues exactly as
// the original and leaves it unchanged: the bundle forks its own state
// (cluster.Policies.Fork), so counterfactual regret works with bundles.
func TestCloneWithBundle(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"b.yaml": `id: fork-test
admission: {kind: starlark, file: adm.star}
priority:
  kind: decision_tree
  tree:
    if: "router.in_flight < 20 and tenant.active < 4"
    then: {priority: 5}
    else: {priority: 1}
routing: {kind: starlark, file: route.star, random: true}
scheduler: {kind: starlark, file: sched.star}
`,
		"adm.star": `def admit(request, cluster):
    n = state.get("n", 0) + 1
    state["n"] = n
    seen = state.setdefault("tenants", {})
    seen[request.tenant_id] = seen.get(request.tenant_id, 0) + 1
    if n % 13 == 0:
        return ("delay", 20000)
    return "admit"
`,
		"route.star": `def route(request, cluster):
    hist = state.setdefault("hist", [])
    hist.append(len(hist))
    if random.float() < 0.3:
        return cluster.replicas[random.int(len(cluster.replicas))].id
    best = None
    for r in cluster.replicas:
        if best == None or r.outstanding < best.outstanding:
            best = r
    return best.id
`,
		"sched.star": `def schedule(queue, replica):
    c = state.get("calls", 0) + 1
    state["calls"] = c
    if c % 2 == 0:
        return reversed([q.id for q in queue])
    return []
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := bundle.Load(filepath.Join(dir, "b.yaml"), bundle.Env{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := workload(7, 300)
	base := testConfig()
	base.Replicas = 3
	base.Engine.KVBlocks = 150
	base.Engine.MaxNumBatchedTokens = 512
	apply := func(sink Sink) (config.Cluster, Options, Sink) {
		c := base
		opts := Options{CheckInvariants: true}
		rt, err := b.Instantiate(&c)
		if err != nil {
			t.Fatal(err)
		}
		opts.Policies = rt.Policies()
		return c, opts, sink
	}
	straight := &memSink{}
	c, opts, s := apply(straight)
	if _, err := Run(c, testModel(c), SliceSource(reqs), s, opts); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{500_000, 2_000_000, 4_000_000} {
		orig := &memSink{}
		c, opts, s := apply(orig)
		cl, f := start(t, c, reqs, s, opts)
		checkFork(t, cl, f, orig, straight, at)
	}
}

// Replicas are separable (a one-replica counterfactual fork is exact)
// until the autoscaler's next action: its next interval, the next tick
// when an event trigger may fire, or a replica's lifecycle timer; always
// without an autoscaler.
func TestSeparableUntil(t *testing.T) {
	reqs := stepLoad(60, 30, 60, 30, 200, 100)
	const keys = "metric: running, target: 1, interval: 10s, sample: 1s, provisioning: {dist: constant, value: 5s}, weight_load: {time: 1s}"
	cases := []struct {
		name, keys string
		at, want   int64
	}{
		{"interval", keys, 3_500_000, 10_000_000},                                         // the first evaluation
		{"triggers", keys + ", triggers: {queue_depth_above: 100}", 3_500_000, 4_000_000}, // the next tick
		{"lifecycle", keys, 11_500_000, 16_000_000},                                       // scaled up at 10 s: ready at 10 + 5 + 1 s
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, models := scaledConfig(t, 2, 1, 4, "least-loaded", tc.keys)
			cl, err := cluster.New(&c, models, &memSink{}, Options{CheckInvariants: true})
			if err != nil {
				t.Fatal(err)
			}
			f := &feeder{c: cl, lastRoot: math.MinInt64}
			if err := f.preloadAll(&sliceSource{reqs: reqs}); err != nil {
				t.Fatal(err)
			}
			runUntil(t, cl, f, tc.at)
			if got := cl.SeparableUntil(); got != tc.want {
				t.Fatalf("at %d µs: separable until %d, want %d", tc.at, got, tc.want)
			}
		})
	}
	c := testConfig()
	c.Replicas = 3
	cl, f := start(t, c, workload(7, 50), &memSink{}, Options{})
	runUntil(t, cl, f, 100_000)
	if got := cl.SeparableUntil(); got != math.MaxInt64 {
		t.Fatalf("without an autoscaler: separable until %d, want always (math.MaxInt64)", got)
	}
}
