package bundle_test

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/rng"
)

const examples = "../../../examples/policies"

type memSink struct{ rs []row.Result }

func (s *memSink) Write(r *row.Result) error { s.rs = append(s.rs, *r); return nil }

// workload is n requests from 4 tenants, two SLO classes, prompts sharing
// one of three system prompts (prefix hashes), Poisson at rate req/s.
func workload(n int, rate float64) []row.Request {
	g := rng.New(7, "test")
	reqs := make([]row.Request, n)
	t := 0.0
	for i := range reqs {
		t += g.ExpFloat64() / rate
		r := row.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS = int64(t * 1e6)
		r.InputTokens = int32(64 + g.IntN(1500))
		r.OutputTokens = int32(8 + g.IntN(400))
		r.TenantID = fmt.Sprint("t", g.IntN(4))
		if g.IntN(3) == 0 {
			r.SLOClass = "interactive"
		} else {
			r.SLOClass = "batch"
		}
		sys := uint64(g.IntN(3) + 1)
		nb := int(r.InputTokens) / 16
		for b := 0; b < nb; b++ {
			if b < 40 {
				r.PrefixHashes = append(r.PrefixHashes, sys*1000+uint64(b))
			} else {
				r.PrefixHashes = append(r.PrefixHashes, uint64(i)*100000+uint64(b))
			}
		}
		reqs[i] = r
	}
	return reqs
}

func testCluster(replicas int) config.Cluster {
	c := config.Default()
	c.Replicas = replicas
	c.Engine.KVBlocks = 4000
	c.Latency = config.Latency{Mode: "linear", Beta: []float64{4000, 0.3, 40}}
	return c
}

// simulate runs reqs on cfg with the bundle at path ("" = none).
func simulate(t testing.TB, cfg config.Cluster, path string, reqs []row.Request) ([]row.Result, engine.Summary, error) {
	t.Helper()
	models, _, err := engine.Prepare(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	opts := engine.Options{CheckInvariants: true}
	if path != "" {
		b, err := bundle.Load(path, bundle.Env{})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := b.Instantiate(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		opts.Policies = rt.Policies()
	}
	sum, err := engine.Run(cfg, models, engine.SliceSource(reqs), sink, opts)
	return sink.rs, sum, err
}

func same(t *testing.T, what string, a, b []row.Result) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d results vs %d", what, len(a), len(b))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Fatalf("%s: result %d differs:\n%+v\n%+v", what, i, a[i], b[i])
		}
	}
}

func spread(rs []row.Result) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[r.ReplicaID]++
	}
	return m
}

// TestParityWithBuiltins: the examples' Starlark least-loaded and the
// tree and template versions of weighted route exactly as the built-ins.
func TestParityWithBuiltins(t *testing.T) {
	reqs := workload(3000, 60)
	for _, tc := range []struct {
		name, bundle string
		builtin      func(*config.Cluster)
	}{
		{"least-loaded starlark", "least-loaded.yaml", func(c *config.Cluster) { c.Router.Routing = "least-loaded" }},
		{"weighted template", "weighted-param.yaml", func(c *config.Cluster) {
			c.Router.Routing = "weighted"
			c.Router.Weights = map[string]float64{"load": 0.2, "kv": 0.1, "prefix": 0.7}
		}},
		{"weighted tree", "weighted-tree.yaml", func(c *config.Cluster) {
			c.Router.Routing = "weighted"
			c.Router.Weights = map[string]float64{"load": 0.2, "kv": 0.1, "prefix": 0.7}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, snap := range []int64{0, 50_000} {
				cfg := testCluster(8)
				cfg.SnapshotInterval = config.Duration(snap * 1000)
				want := cfg
				tc.builtin(&want)
				a, _, err := simulate(t, want, "", reqs)
				if err != nil {
					t.Fatal(err)
				}
				b, _, err := simulate(t, cfg, filepath.Join(examples, tc.bundle), reqs)
				if err != nil {
					t.Fatal(err)
				}
				same(t, tc.name, a, b)
				if len(spread(a)) < 3 {
					t.Fatalf("the workload used only %d replicas: not a test", len(spread(a)))
				}
			}
		})
	}
	// And the comparison can fail: least-loaded is not round-robin.
	cfg := testCluster(8)
	a, _, _ := simulate(t, cfg, "", reqs)
	b, _, _ := simulate(t, cfg, filepath.Join(examples, "least-loaded.yaml"), reqs)
	if reflect.DeepEqual(a, b) {
		t.Fatal("round-robin and least-loaded agree on every request: the parity test cannot fail")
	}
}

// TestExamples runs every example bundle.
func TestExamples(t *testing.T) {
	reqs := workload(4000, 120)
	files, _ := filepath.Glob(filepath.Join(examples, "*.yaml"))
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "cluster.yaml" {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg := testCluster(4)
			cfg.Engine.SchedulingPolicy = "priority"
			rs, sum, err := simulate(t, cfg, f, reqs)
			if err != nil {
				t.Fatal(err)
			}
			if int(sum.Injected) != len(reqs) || len(rs) != len(reqs) {
				t.Fatalf("%d injected, %d results, %d requests", sum.Injected, len(rs), len(reqs))
			}
			if sum.Completed == 0 {
				t.Fatal("nothing completed")
			}
			t.Logf("completed %d, rejected %d", sum.Completed, sum.Rejected)
		})
	}
	if n < 6 {
		t.Fatalf("%d example bundles", n)
	}
}

// TestWorkedExamplesDoWhatTheySay checks the three worked examples'
// effects against the built-in they refine.
func TestWorkedExamplesDoWhatTheySay(t *testing.T) {
	reqs := workload(4000, 400)
	ttft := func(rs []row.Result, class string) float64 {
		s, n := 0.0, 0
		for _, r := range rs {
			if r.SLOClass == class && r.TTFTUS != row.Null {
				s += float64(r.TTFTUS)
				n++
			}
		}
		return s / float64(n)
	}
	cfg := testCluster(4)
	cfg.Engine.SchedulingPolicy = "priority"
	cfg.Router.Routing = "least-loaded"
	base, _, _ := simulate(t, cfg, "", reqs)
	slo, _, err := simulate(t, cfg, filepath.Join(examples, "slo-priority.yaml"), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := ttft(base, "interactive"), ttft(slo, "interactive"); !(b < a) {
		t.Fatalf("slo-priority: interactive mean TTFT %.0f µs, not below fcfs's %.0f", b, a)
	}
	hits := func(rs []row.Result) int64 {
		var n int64
		for _, r := range rs {
			n += int64(r.CachedTokens)
		}
		return n
	}
	// Prefix-and-load routing on conversations whose prompts grow turn by
	// turn (the previous prompt, then new blocks): affinity pays.
	conv := sessions(120, 8)
	llc := cfg
	llc.Engine.SchedulingPolicy = "fcfs"
	base, _, _ = simulate(t, llc, "", conv)
	pl, _, err := simulate(t, llc, filepath.Join(examples, "prefix-load.yaml"), conv)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := hits(base), hits(pl); !(b > a*11/10) {
		t.Fatalf("prefix-load: %d cached tokens, not 10%% above least-loaded's %d", b, a)
	}
	t.Logf("conversations: least-loaded %d cached tokens, prefix-load %d (KV events 50 ms late)", hits(base), hits(pl))
	// Tenant-fair: one tenant floods steadily; it is delayed, the others
	// are not. When it also bursts, what gets rejected is the flood.
	flood := workload(3000, 150)
	for i := range flood {
		if i%4 != 0 {
			flood[i].TenantID = "flood"
		}
	}
	cfg = testCluster(2)
	tf, _, err := simulate(t, cfg, filepath.Join(examples, "tenant-fair.yaml"), flood)
	if err != nil {
		t.Fatal(err)
	}
	delayed, rejected := map[string]int{}, map[string]int{}
	for _, r := range tf {
		if r.Status == row.StatusRejected {
			rejected[r.TenantID]++
		} else if r.AdmittedUS > r.ArrivalUS {
			delayed[r.TenantID]++
		}
	}
	if delayed["flood"] < 100 || delayed["flood"] < 20*(sumOthers(delayed)+sumOthers(rejected)) || 10*rejected["flood"] > delayed["flood"] {
		t.Fatalf("tenant-fair, steady flood: delayed by tenant %v, rejected %v", delayed, rejected)
	}
	t.Logf("tenant-fair, steady flood: delayed by tenant %v, rejected %v", delayed, rejected)
	// The same flood with a burst of 400 requests within 0.4 s at 10 s.
	burst := append([]row.Request(nil), flood...)
	for k := 0; k < 400; k++ {
		r := row.NewRequest(fmt.Sprint("burst", k))
		r.ArrivalUS, r.InputTokens, r.OutputTokens, r.TenantID = 10_000_000+int64(k)*1000, 200, 50, "flood"
		burst = append(burst, r)
	}
	slices.SortStableFunc(burst, func(a, b row.Request) int { return cmp.Compare(a.ArrivalUS, b.ArrivalUS) })
	tb, sum, err := simulate(t, cfg, filepath.Join(examples, "tenant-fair.yaml"), burst)
	if err != nil {
		t.Fatal(err)
	}
	rejected = map[string]int{}
	for _, r := range tb {
		if r.Status == row.StatusRejected {
			rejected[r.TenantID]++
		}
	}
	if rejected["flood"] == 0 || int64(rejected["flood"]) < 10*(sum.Rejected-int64(rejected["flood"])) {
		t.Fatalf("tenant-fair, bursting flood: rejected by tenant %v", rejected)
	}
	t.Logf("tenant-fair, bursting flood: rejected by tenant %v", rejected)
}

// sessions is n conversations of turns turns: each turn's prompt is the
// previous one plus 20 new blocks of 16 tokens (a key chain of its own per
// conversation), 2 s of think time between turns, conversations starting
// 50 ms apart.
func sessions(n, turns int) []row.Request {
	var reqs []row.Request
	for s := 0; s < n; s++ {
		for k := 0; k < turns; k++ {
			r := row.NewRequest(fmt.Sprintf("s%d-t%d", s, k))
			r.ArrivalUS = int64(s)*50_000 + int64(k)*2_000_000
			r.SessionID = fmt.Sprint("s", s)
			blocks := 20 * (k + 1)
			r.InputTokens, r.OutputTokens = int32(16*blocks+1), 50
			for b := 0; b < blocks; b++ {
				r.PrefixHashes = append(r.PrefixHashes, uint64(s+1)*1_000_000+uint64(b))
			}
			reqs = append(reqs, r)
		}
	}
	slices.SortStableFunc(reqs, func(a, b row.Request) int { return cmp.Compare(a.ArrivalUS, b.ArrivalUS) })
	return reqs
}

// sumOthers is the count over every tenant but the flood.
func sumOthers(m map[string]int) int {
	n := 0
	for k, v := range m {
		if k != "flood" {
			n += v
		}
	}
	return n
}

func TestState(t *testing.T) {
	p := writeBundle(t, map[string]string{"b.yaml": "routing: {kind: starlark, file: r.star}\n",
		"r.star": "def route(request, cluster):\n    state['n'] = state.get('n', 0) + 1\n    return cluster.replicas[0].id\n"})
	b, err := bundle.Load(p, bundle.Env{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testCluster(2)
	models, _, _ := engine.Prepare(&cfg)
	opts := engine.Options{}
	rt, err := b.Instantiate(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Policies = rt.Policies()
	if _, err := engine.Run(cfg, models, engine.SliceSource(workload(50, 10)), &memSink{}, opts); err != nil {
		t.Fatal(err)
	}
	if got := rt.State("routing"); got != `{"n": 50}` {
		t.Fatalf("state %s", got)
	}
}

// TestTenantCountsExact: a tree rejecting a tenant's requests after its
// first three rejects exactly Σ max(0, n_t − 3) with a live view.
func TestTenantCountsExact(t *testing.T) {
	reqs := workload(400, 40)
	per := map[string]int{}
	for _, r := range reqs {
		per[r.TenantID]++
	}
	want := 0
	for _, n := range per {
		want += max(0, n-3)
	}
	p := writeBundle(t, map[string]string{"b.yaml": "admission:\n  kind: decision_tree\n  tree: {if: \"tenant.request_count >= 3\", then: {admit: reject, reason: quota}, else: {admit: admit}}\n"})
	rs, sum, err := simulate(t, testCluster(2), p, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rejected != int64(want) {
		t.Fatalf("rejected %d, want %d (%v)", sum.Rejected, want, per)
	}
	for _, r := range rs {
		if r.Status == row.StatusRejected && r.DropReason != "quota" {
			t.Fatalf("reason %q", r.DropReason)
		}
	}
}

func TestRandomStream(t *testing.T) {
	files := map[string]string{"b.yaml": "routing: {kind: starlark, file: r.star, random: true}\n",
		"r.star": "def route(request, cluster):\n    return cluster.replicas[random.int(cluster.size)].id\n"}
	reqs := workload(300, 30)
	cfg := testCluster(4)
	a, _, err := simulate(t, cfg, writeBundle(t, files), reqs)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := simulate(t, cfg, writeBundle(t, files), reqs)
	same(t, "same seed", a, b)
	cfg.Seed = 7
	c, _, _ := simulate(t, cfg, writeBundle(t, files), reqs)
	if reflect.DeepEqual(a, c) {
		t.Fatal("another seed drew the same replicas")
	}
	if len(spread(a)) != 4 {
		t.Fatalf("spread %v", spread(a))
	}
}

func TestDeterministic(t *testing.T) {
	reqs := workload(2000, 150)
	cfg := testCluster(4)
	p := filepath.Join(examples, "tenant-fair.yaml")
	a, _, err := simulate(t, cfg, p, reqs)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := simulate(t, cfg, p, reqs)
	same(t, "twice", a, b)
}

func writeBundle(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "b.yaml")
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"unknown key", map[string]string{"b.yaml": "id: x\nroutin: {kind: starlark}\n"}, "b.yaml:2: routin: unknown key"},
		{"bad kind", map[string]string{"b.yaml": "routing: {kind: python}\n"}, `b.yaml:1: routing.kind: expected parameterized, decision_tree or starlark, found "python"`},
		{"unknown template", map[string]string{"b.yaml": "routing:\n  kind: parameterized\n  template: fastest\n"}, `b.yaml:3: routing.template: unknown routing policy "fastest"`},
		{"unknown param", map[string]string{"b.yaml": "routing:\n  kind: parameterized\n  template: weighted\n  params: {lod: 1}\n"}, "b.yaml:4: routing.params.lod: unknown key (expected load, kv, prefix)"},
		{"param out of range", map[string]string{"b.yaml": "admission:\n  kind: parameterized\n  template: queue-limit\n  params: {limit: 0}\n"}, "b.yaml:4: admission.params: admission policy queue-limit: parameter limit: expected an integer >= 1"},
		{"unknown field", map[string]string{"b.yaml": "priority:\n  kind: decision_tree\n  tree:\n    if: \"request.slo == 'x'\"\n    then: {priority: 1}\n    else: {priority: 0}\n"}, "b.yaml:4: priority.tree.if: \"request.slo == 'x'\": unknown field request.slo (expected one of"},
		{"replica field without score", map[string]string{"b.yaml": "routing:\n  kind: decision_tree\n  tree: {if: \"replica.outstanding > 3\", then: {route: least-loaded}, else: {route: round-robin}}\n"}, "replica fields need score leaves"},
		{"wait in a score tree", map[string]string{"b.yaml": "routing:\n  kind: decision_tree\n  tree: {if: \"cluster.held > 3\", then: {score: 1, wait_us: 5}, else: {score: 2}}\n"}, "b.yaml:3: routing.tree.then.wait_us: not in a score leaf"},
		{"wait and route", map[string]string{"b.yaml": "routing:\n  kind: decision_tree\n  tree: {if: \"cluster.held > 3\", then: {route: least-loaded, wait_us: 5}, else: {route: round-robin}}\n"}, "b.yaml:3: routing.tree.then.route: a leaf routes the request or holds it (wait_us), not both"},
		{"wait not positive", map[string]string{"b.yaml": "routing:\n  kind: decision_tree\n  tree: {if: \"cluster.held > 3\", then: {wait_us: 0}, else: {route: round-robin}}\n"}, "b.yaml:3: routing.tree.then.wait_us"},
		{"reason without wait", map[string]string{"b.yaml": "routing:\n  kind: decision_tree\n  tree: {if: \"cluster.held > 3\", then: {route: least-loaded, reason: x}, else: {route: round-robin}}\n"}, "routing.tree.then.reason: only with wait_us"},
		{"hold template wait", map[string]string{"b.yaml": "routing: {kind: parameterized, template: least-loaded-hold, params: {wait_us: 0}}\n"}, "parameter wait_us: expected an integer in [1, "},
		{"type error", map[string]string{"b.yaml": "priority:\n  kind: decision_tree\n  tree: {if: \"request.input_tokens > 'a'\", then: {priority: 1}, else: {priority: 0}}\n"}, "cannot compare a int with a string"},
		{"missing else", map[string]string{"b.yaml": "priority:\n  kind: decision_tree\n  tree: {if: \"request.input_tokens > 5\", then: {priority: 1}}\n"}, "b.yaml:3: priority.tree: missing else"},
		{"bytes constant", map[string]string{"b.yaml": "priority:\n  kind: decision_tree\n  tree: {if: \"request.tenant_id == b'a'\", then: {priority: 1}, else: {priority: 0}}\n"}, "unsupported constant b'a' (expected an int, a float or a string)"},
		{"starlark syntax", map[string]string{"b.yaml": "routing: {kind: starlark, file: r.star}\n", "r.star": "def route(request, cluster):\n    return (\n"}, "r.star:3:1: got outdent"},
		{"inline syntax at bundle line", map[string]string{"b.yaml": "id: x\nrouting:\n  kind: starlark\n  source: |\n    def route(request, cluster):\n        return request.id +\n"}, "b.yaml:6:24: got newline"},
		{"missing entrypoint", map[string]string{"b.yaml": "admission: {kind: starlark, file: r.star}\n", "r.star": "def route(request, cluster):\n    return 1\n"}, "r.star: admission policy: no function admit(request, cluster) defined"},
		{"while", map[string]string{"b.yaml": "routing: {kind: starlark, file: r.star}\n", "r.star": "def route(request, cluster):\n    while True:\n        pass\n"}, "r.star:2:5: this Starlark dialect does not support while loops"},
		{"load", map[string]string{"b.yaml": "routing: {kind: starlark, file: r.star}\n", "r.star": "load('os.star', 'x')\ndef route(request, cluster):\n    return 1\n"}, `load("os.star"): not allowed`},
		{"undefined random", map[string]string{"b.yaml": "routing: {kind: starlark, file: r.star}\n", "r.star": "def route(request, cluster):\n    return random.int(3)\n"}, "r.star:2:12: undefined: random"},
		{"missing file", map[string]string{"b.yaml": "routing: {kind: starlark, file: nope.star}\n"}, "b.yaml:1: routing.file:"},
		{"top-level error", map[string]string{"b.yaml": "routing: {kind: starlark, file: r.star}\n", "r.star": "X = 1 // 0\ndef route(request, cluster):\n    return 1\n"}, "r.star:1: routing policy: floored division by zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bundle.Load(writeBundle(t, tc.files), bundle.Env{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %q", err, tc.want)
			}
		})
	}
}

func TestSandboxErrors(t *testing.T) {
	reqs := workload(200, 50)
	for _, tc := range []struct {
		name, src, want string
	}{
		{"step budget", "def route(request, cluster):\n    n = 0\n    for i in range(100000):\n        for j in range(100000):\n            n += 1\n    return 'x'\n",
			"routing policy, request r0: step budget exceeded: more than 100000 steps in one call (sandbox.max_steps)"},
		{"runtime error", "def route(request, cluster):\n    return cluster.replicas[99].id\n", "r.star:2: routing policy, request r0: tuple index 99 out of range"},
		{"wrong type", "def route(request, cluster):\n    return 3\n", "r.star:1: routing policy, request r0: route returned a int, expected a replica id"},
		{"not a candidate", "def route(request, cluster):\n    return 'gpu-9'\n", `request r0: route returned "gpu-9", which is not a candidate replica id`},
		{"wait zero", "def route(request, cluster):\n    return ('wait', 0)\n", `r.star:1: routing policy, request r0: route returned ("wait", 0): 0, expected an integer number of microseconds > 0`},
		{"wait negative", "def route(request, cluster):\n    return {'wait': -5, 'reason': 'x'}\n", `routing policy, request r0: route returned "wait": -5, expected an integer number of microseconds > 0`},
		{"wait float", "def route(request, cluster):\n    return ('wait', 1.5)\n", `route returned ("wait", 1.5): 1.5, expected an integer number of microseconds > 0`},
		{"wait and target", "def route(request, cluster):\n    return {'wait': 5, 'target': cluster.replicas[0].id}\n", `route returned a dict with both "target" and "wait"`},
		{"reason without wait", "def route(request, cluster):\n    return {'target': cluster.replicas[0].id, 'reason': 'x'}\n", `route returned a dict with key "reason" and no "wait"`},
		{"wait reason type", "def route(request, cluster):\n    return ('wait', 5, 3)\n", `the reason is a int, expected a non-empty string`},
		{"string growth", "def route(request, cluster):\n    s = 'x' * 1000\n    for i in range(40):\n        s = s + s\n    return s\n", "r.star:4: routing policy, request r0: value of 2048000 elements or bytes: more than 1048576 (sandbox.max_len)"},
		{"repeat", "def route(request, cluster):\n    return 'x' * (1 << 40)\n", "(sandbox.max_len)"},
		{"join growth", "def route(request, cluster):\n    s = 'x' * 100000\n    return ''.join([s for i in range(100)])\n", "(sandbox.max_len)"},
		{"state growth", "def route(request, cluster):\n    l = state.setdefault('l', [])\n    l.extend(range(1000))\n    return cluster.replicas[0].id\n", "(sandbox.max_state)"},
		{"view in state", "def route(request, cluster):\n    state['r'] = request\n    return cluster.replicas[0].id\n", "keep numbers, not views"},
		{"integer growth", "def route(request, cluster):\n    x = 3\n    for i in range(20):\n        x = x * x\n    return 'x'\n", "r.star:4: routing policy, request r0: integer of more than 4096 bits"},
		{"replace growth", "def route(request, cluster):\n    s = 'ab' * 1000\n    return s.replace('a', 'x' * 10000)\n", "r.star:3: routing policy, request r0: value of 10002000 elements or bytes"},
		{"frozen global", "L = []\ndef route(request, cluster):\n    L.append(1)\n    return cluster.replicas[0].id\n", "r.star:3: routing policy, request r0: append: cannot append to frozen list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeBundle(t, map[string]string{"b.yaml": "sandbox: {max_steps: 100000, max_state: 5000}\nrouting: {kind: starlark, file: r.star}\n", "r.star": tc.src})
			_, _, err := simulate(t, testCluster(2), p, reqs)
			var re *bundle.RunError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %q", err, tc.want)
			}
		})
	}
}

// TestStarlarkViews checks every view field a Starlark policy reads
// against the same decision seen by a decision tree.
func TestStarlarkViews(t *testing.T) {
	src := `
load("math.star", "math")

def admit(request, cluster):
    if math.floor(2.5) != 2:
        return ("reject", "math")
    live = cluster.router.request_count == state.get("n", 0)
    r = request
    fields = [r.id, r.tenant_id, r.slo_class, r.model, r.session_id, r.priority, r.input_tokens,
              r.output_tokens, r.arrival_us, r.prefix_blocks, r.now_us]
    for x in cluster.replicas:
        fields += [x.id, x.index, x.deployment, x.pool_role, x.state, x.queue_depth, x.batch_size, x.in_flight,
                   x.outstanding, x.kv_utilization, x.kv_free_blocks, x.kv_used_blocks, x.kv_total_blocks,
                   x.cached_blocks(request), x.cache_hit_rate, x.recent_ttft_us, x.recent_tpot_us, x.estimated_wait_us]
    t = cluster.tenant
    fields += [t.id, t.request_count, t.active, t.recent_rate, t.burst_detected]
    g = cluster.router
    fields += [g.in_flight, g.request_count, g.completed, g.request_rate, g.throughput]
    fields += [cluster.size, cluster.max_load, cluster.min_load, cluster.queued, cluster.now_us]
    state["n"] = state.get("n", 0) + 1
    if request.arrival_us > 2000000 and cluster.router.completed == 0:
        return ("reject", "nothing completed after 2 s")
    if live and t.request_count != state["n"] - 1:
        return ("reject", "count")
    return "admit"
`
	p := writeBundle(t, map[string]string{"b.yaml": "admission: {kind: starlark, file: a.star}\n", "a.star": src})
	reqs := workload(1000, 80)
	for i := range reqs {
		reqs[i].TenantID = ""
	}
	for _, snap := range []int64{0, 100_000} {
		cfg := testCluster(3)
		cfg.Router.Routing = "least-loaded"
		cfg.SnapshotInterval = config.Duration(snap * 1000)
		_, sum, err := simulate(t, cfg, p, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Rejected != 0 || sum.Completed != int64(len(reqs)) {
			t.Fatalf("snapshot %d: %+v", snap, sum)
		}
	}
}

// TestSchedulerAndPreemption: Starlark and tree versions of the
// scheduler and preemption templates agree with them, and vLLM's own
// choices written as policies change nothing.
func TestSchedulerAndPreemption(t *testing.T) {
	reqs := workload(1500, 80)
	cfg := testCluster(2)
	cfg.Engine.KVBlocks = 600 // preemptions
	cfg.Router.Routing = "least-loaded"
	run := func(files map[string]string) ([]row.Result, engine.Summary) {
		path := ""
		if files != nil {
			path = writeBundle(t, files)
		}
		rs, sum, err := simulate(t, cfg, path, reqs)
		if err != nil {
			t.Fatal(err)
		}
		return rs, sum
	}
	base, bs := run(nil)
	if bs.Preemptions == 0 {
		t.Fatal("no preemptions: not a test")
	}
	newest, _ := run(map[string]string{"b.yaml": "preemption: {kind: starlark, file: p.star}\n",
		"p.star": "def preempt(running, replica):\n    return running[len(running) - 1].id\n"})
	same(t, "starlark newest = vLLM", base, newest)

	sf, _ := run(map[string]string{"b.yaml": "scheduler: {kind: parameterized, template: shortest-first}\n"})
	if reflect.DeepEqual(base, sf) {
		t.Fatal("shortest-first changed nothing")
	}
	sfStar, _ := run(map[string]string{"b.yaml": "scheduler: {kind: starlark, file: s.star}\n",
		"s.star": `
def schedule(queue, replica):
    keyed = [(r.input_tokens - r.computed_tokens, i) for i, r in enumerate(queue)]
    return [i for _, i in sorted(keyed)]
`})
	// Starlark breaks ties by queue position, the template by vLLM's order:
	// close to the template, far from vLLM's FCFS.
	if reflect.DeepEqual(base, sfStar) {
		t.Fatal("Starlark shortest-first changed nothing")
	}
	firstSched := func(rs []row.Result) (short, long float64) {
		var ns, nl float64
		for _, r := range rs {
			w := float64(r.FirstScheduledUS - r.EnqueuedUS)
			if r.InputTokens < 400 {
				short, ns = short+w, ns+1
			} else if r.InputTokens > 1200 {
				long, nl = long+w, nl+1
			}
		}
		return short / ns, long / nl
	}
	bs0, bl0 := firstSched(base)
	ss0, sl0 := firstSched(sfStar)
	if !(ss0 < bs0 && sl0 > bl0) {
		t.Fatalf("Starlark shortest-first: short prompts wait %.0f µs (FCFS %.0f), long %.0f (FCFS %.0f)", ss0, bs0, sl0, bl0)
	}
	sfTree, _ := run(map[string]string{"b.yaml": "scheduler:\n  kind: decision_tree\n  tree: {score: \"0 - (request.input_tokens - request.computed_tokens)\"}\n"})
	same(t, "tree shortest-first = template", sf, sfTree)

	lp, _ := run(map[string]string{"b.yaml": "preemption: {kind: parameterized, template: least-progress}\n"})
	lpTree, _ := run(map[string]string{"b.yaml": "preemption:\n  kind: decision_tree\n  tree: {score: \"0 - request.generated_tokens\"}\n"})
	same(t, "tree least-progress = template", lp, lpTree)
	if reflect.DeepEqual(base, lp) {
		t.Fatal("least-progress changed nothing")
	}
}

func TestAutoscalerStage(t *testing.T) {
	pool := &bundle.PoolView{Deployment: "d", Role: "monolithic", Replicas: 2, MinReplicas: 1, MaxReplicas: 8, Serving: 2, Waiting: 40, Running: 10}
	for _, tc := range []struct {
		stage string
		files map[string]string
		want  int
	}{
		{"template", map[string]string{"b.yaml": "autoscaler: {kind: parameterized, template: target-load, params: {target: 16}}\n"}, 4},
		{"tree", map[string]string{"b.yaml": "autoscaler:\n  kind: decision_tree\n  tree: {if: \"pool.queue_depth > 10 * pool.replicas\", then: {delta: 1}, else: {delta: 0}}\n"}, 3},
		{"starlark", map[string]string{"b.yaml": "autoscaler: {kind: starlark, file: s.star}\n",
			"s.star": "def scale(pool, cluster):\n    return (min(pool.max_replicas, pool.outstanding // 10), 'load/10')\n"}, 5},
	} {
		b, err := bundle.Load(writeBundle(t, tc.files), bundle.Env{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := testCluster(1)
		rt, err := b.Instantiate(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		n, why, err := rt.Scaler().Scale(pool, []*bundle.PoolView{pool})
		if err != nil || n != tc.want {
			t.Fatalf("%s: %d (%s) %v, want %d", tc.stage, n, why, err, tc.want)
		}
	}
}

func TestProvenance(t *testing.T) {
	b, err := bundle.Load(writeBundle(t, map[string]string{"b.yaml": "id: cand-17\ngeneration: 3\nparent_id: cand-9\nmutations: [\"raise prefix weight\"]\n"}), bundle.Env{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range b.Provenance() {
		m[kv[0]] = kv[1]
	}
	for k, v := range map[string]string{"blis.policy.id": "cand-17", "blis.policy.generation": "3", "blis.policy.parent_id": "cand-9", "blis.policy.mutations": `["raise prefix weight"]`} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if len(m["blis.policy.sha256"]) != 64 {
		t.Error("no sha256")
	}
}

var _ = math.Inf

// TestPriorityScores: a priority stage returns a score, float or int, in
// Starlark and in a tree (an expression); both order the waiting queue the
// same way, and the run is the same as the built-in `request` priority
// when the score is the priority column. Hints are refused, naming the
// line, not silently dropped.
func TestPriorityScores(t *testing.T) {
	reqs := workload(600, 120)
	for i := range reqs {
		reqs[i].Priority = int32(i % 5)
	}
	cfg := testCluster(2)
	cfg.Engine.SchedulingPolicy = "priority"
	cfg.Router.Priority = "request"
	builtin, _, err := simulate(t, cfg, "", reqs)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Router.Priority = "fcfs"
	for name, files := range map[string]map[string]string{
		"starlark float":  {"b.yaml": "priority: {kind: starlark, file: p.star}\n", "p.star": "def priority(request, cluster):\n    return request.priority / 4.0\n"},
		"starlark dict":   {"b.yaml": "priority: {kind: starlark, file: p.star}\n", "p.star": "def priority(request, cluster):\n    return {\"priority\": request.priority, \"hints\": {}}\n"},
		"tree expression": {"b.yaml": "priority:\n  kind: decision_tree\n  tree: {priority: \"request.priority * 0.5 - 3\"}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, _, err := simulate(t, cfg, writeBundle(t, files), reqs)
			if err != nil {
				t.Fatal(err)
			}
			same(t, name+" vs the request template", builtin, got)
		})
	}
	p := writeBundle(t, map[string]string{"b.yaml": "priority: {kind: starlark, file: p.star}\n",
		"p.star": "def priority(request, cluster):\n    return {\"priority\": 1, \"hints\": {\"preemptible\": False}}\n"})
	_, _, err = simulate(t, cfg, p, reqs)
	if err == nil || !strings.Contains(err.Error(), `p.star:1: priority policy, request r0: priority returned "hints": {"preemptible": False}: priority hints are not supported`) {
		t.Fatalf("hints: got %v", err)
	}
}

// TestRunStepBudget: sandbox.max_run_steps bounds the Starlark steps of the
// whole run, every stage's calls together (each call alone is legal); a
// caller's LimitRunSteps can only lower it; Interrupt stops the run with
// its reason.
func TestRunStepBudget(t *testing.T) {
	reqs := workload(300, 50)
	src := "def route(request, cluster):\n    n = 0\n    for i in range(1000):\n        n += i\n    return cluster.replicas[0].id\n"
	run := func(head string, limit uint64, interrupt bool) error {
		p := writeBundle(t, map[string]string{"b.yaml": head + "routing: {kind: starlark, file: r.star}\n", "r.star": src})
		b, err := bundle.Load(p, bundle.Env{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := testCluster(2)
		models, _, _ := engine.Prepare(&cfg)
		rt, err := b.Instantiate(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		rt.LimitRunSteps(limit)
		if interrupt {
			rt.Interrupt(errors.New("stopped by the test"))
		}
		_, err = engine.Run(cfg, models, engine.SliceSource(reqs), &memSink{}, engine.Options{Policies: rt.Policies()})
		return err
	}
	// About 4,000 steps a call: 300 calls need about 1.2 M.
	if err := run("sandbox: {max_run_steps: 100000}\n", 0, false); err == nil || !strings.Contains(err.Error(), "whole-run step budget exceeded: more than 100000 Starlark steps") {
		t.Fatalf("bundle budget: %v", err)
	}
	if err := run("sandbox: {max_run_steps: 100000000}\n", 0, false); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	if err := run("sandbox: {max_run_steps: 100000000}\n", 50000, false); err == nil || !strings.Contains(err.Error(), "more than 50000 Starlark steps") {
		t.Fatalf("the caller's lower cap: %v", err)
	}
	if err := run("sandbox: {max_run_steps: 0}\n", 0, false); err != nil {
		t.Fatalf("0, no budget (as absent): %v", err)
	}
	if err := run("", 0, true); err == nil || err.Error() != "stopped by the test" {
		t.Fatalf("interrupted: %v", err)
	}
}

// TestLoRAAffinityStarlark: the examples' Starlark lora-affinity routes
// exactly as the built-in, live and with snapshots.
func TestLoRAAffinityStarlark(t *testing.T) {
	reqs := workload(3000, 60)
	for i := range reqs {
		if k := i % 7; k < 6 {
			reqs[i].LoRA = fmt.Sprint("a", k)
		}
	}
	for _, snap := range []int64{0, 50_000} {
		cfg := testCluster(8)
		cfg.SnapshotInterval = config.Duration(snap * 1000)
		cfg.LoRA = &config.LoRA{MaxLoras: 2, MaxLoraRank: 16}
		for k := 0; k < 6; k++ {
			cfg.LoRA.Adapters = append(cfg.LoRA.Adapters, config.Adapter{Name: fmt.Sprint("a", k), Rank: 8 << (k % 2)})
		}
		want := cfg
		want.Router.Routing = "lora-affinity"
		a, sa, err := simulate(t, want, "", reqs)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := simulate(t, cfg, filepath.Join(examples, "lora-affinity.yaml"), reqs)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "lora-affinity starlark", a, b)
		if len(spread(a)) < 3 || sa.LoRALoads == 0 {
			t.Fatalf("the workload used %d replicas and loaded %d adapters: not a test", len(spread(a)), sa.LoRALoads)
		}
	}
}
