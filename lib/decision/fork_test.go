package decision

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/trace"
)

// delayEvery delays every fifth request's admission by 3 ms once (a
// request held by admission when others are sampled).
type delayEvery struct{}

func (delayEvery) Admit(r policy.RequestView, _ *policy.ClusterView) policy.AdmitDecision {
	if r.InputTokens()%5 == 0 && r.NowUS()-r.ArrivalUS() < 3000 {
		return policy.AdmitDecision{Verdict: policy.Delay, DelayUS: 3000, Reason: "test"}
	}
	return policy.AdmitDecision{}
}

// regretRows runs reqs with every routing decision sampled and returns
// the sampled routing rows, printed.
func regretRows(t *testing.T, c config.Cluster, reqs []trace.Request, adm policy.Admission, whole bool) []string {
	rows, _ := regretRun(t, c, reqs, adm, whole)
	return rows
}

// regretRun is regretRows, with the recorder's regret state (how the
// samples were replayed).
func regretRun(t *testing.T, c config.Cluster, reqs []trace.Request, adm policy.Admission, whole bool) ([]string, *regretState) {
	t.Helper()
	wholeForks = whole
	defer func() { wholeForks = false }()
	models, _, err := engine.Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	ds := &decisions{}
	rec := New(Config{Level: Decisions, Decisions: ds, Regret: RegretConfig{Sample: 0.5, Seed: 3, WindowUS: 400_000}})
	opts := engine.Options{CheckInvariants: true, Policies: cluster.Policies{Admission: adm}}
	rec.Attach(&opts)
	if _, err := engine.Run(c, models, engine.SliceSource(reqs), rec.Sink(&results{}), opts); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, d := range ds.ds {
		if d.Kind == trace.DecisionRouting && d.RegretUS != trace.Null {
			rows = append(rows, fmt.Sprint(d.RequestID, d.RegretUS, d.WindowRegretUS, d.Candidates))
		}
	}
	return rows, &rec.regret
}

// withDependencies makes every sixth request depend on the one before,
// through a tool call for every third of those.
func withDependencies(reqs []trace.Request) []trace.Request {
	var out []trace.Request
	for i, r := range reqs {
		if i > 0 && i%6 == 0 {
			parent := reqs[i-1].ID
			if i%18 == 0 {
				tool := trace.NewRequest(fmt.Sprint("tool", i))
				tool.Kind, tool.DelayUS, tool.DependsOn = trace.KindTool, 2000, []string{parent}
				tool.ArrivalUS = reqs[i-1].ArrivalUS
				out = append(out, tool)
				parent = tool.ID
			}
			r.DependsOn = []string{parent}
		}
		out = append(out, r)
	}
	return out
}

// Restricted forks (one replica each, when the cluster is separable) and
// whole-cluster forks give the same counterfactual TTFTs, window means and
// regrets, on workloads with KV pressure (preemptions), prefix caching,
// dependencies and tool calls, admission delays, client timeouts, network
// transfers and a router snapshot interval.
func TestRestrictedForksMatchWholeForks(t *testing.T) {
	base := workload(17, 500)
	cases := []struct {
		name string
		cfg  func() config.Cluster
		reqs []trace.Request
		adm  policy.Admission
	}{
		{"least-loaded", func() config.Cluster { return testConfig(4, "least-loaded") }, base, nil},
		{"prefix-affinity", func() config.Cluster { return testConfig(5, "prefix-affinity") }, base, nil},
		{"dependencies", func() config.Cluster { return testConfig(3, "weighted") }, withDependencies(base), nil},
		{"admission-delay-timeout-network", func() config.Cluster {
			c := testConfig(4, "least-loaded")
			c.ClientTimeout = config.Duration(150 * time.Millisecond)
			c.Network.RTT = config.Duration(2 * time.Millisecond)
			return c
		}, base, delayEvery{}},
		{"snapshots", func() config.Cluster {
			c := testConfig(4, "least-loaded")
			c.SnapshotInterval = config.Duration(5 * time.Millisecond)
			return c
		}, base, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			restricted := regretRows(t, tc.cfg(), tc.reqs, tc.adm, false)
			whole := regretRows(t, tc.cfg(), tc.reqs, tc.adm, true)
			sameRegretRows(t, restricted, whole)
		})
	}
}

// A one-replica fork holds a placeholder for every other replica: reaching
// one is an internal error, never a silent answer.
func TestRestrictedForkGuardsOtherReplicas(t *testing.T) {
	c := testConfig(3, "least-loaded")
	_, rec := simulate(t, c, workload(2, 20), &Config{Regret: RegretConfig{Sample: 1}})
	var a cluster.ForkArena
	f, _ := rec.c.ForkReplica(&a, 1, false)
	if f.Replicas()[1].Sched == nil || f.Replicas()[1].ID != rec.c.Replicas()[1].ID {
		t.Fatal("the fork does not hold its replica")
	}
	defer func() {
		v := recover()
		if s, _ := v.(string); !strings.Contains(s, "internal error") || !strings.Contains(s, "does not hold") {
			t.Fatalf("reaching a replica the fork does not hold: %v, want an internal error", v)
		}
	}()
	f.Replicas()[0].Sched.HasWork()
}

// An autoscaled cluster's samples are replayed with one-replica forks up
// to the autoscaler's next action (cluster.SeparableUntil), and with whole
// clusters when the replays need longer: the same numbers as whole forks
// throughout, with both ways taken, on pools that scale up and down every
// few hundred milliseconds (provisioning, warm-up, drains that redirect or
// kill, event triggers).
func TestRestrictedForksMatchWholeForksAutoscaled(t *testing.T) {
	const pool = `
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 300, max_num_batched_tokens: 512}
    latency: {mode: linear, beta: [1000, 1, 10]}
    pools:
      - role: monolithic
        replicas: 3
        min_replicas: 1
        max_replicas: 6
        autoscaler:
          sample: 50ms
          provisioning: {dist: constant, value: 50ms}
          weight_load: {time: 30ms}
          warmup: {curve: linear, duration: 200ms, initial_factor: 2}
%s
router: {routing: least-loaded}
`
	cases := []struct{ name, autoscaler string }{
		{"interval", `
          metric: queue_depth
          target: 4
          interval: 100ms
          stabilization: {up: 0s, down: 500ms}
          drain: {mode: redirect, timeout: 100ms}`},
		{"triggers", `
          metric: running
          target: 8
          interval: 2s
          stabilization: {up: 0s, down: 0s}
          drain: {mode: immediate}
          triggers: {queue_depth_above: 3}`},
	}
	// Bursts of 50 requests in 100 ms, 600 ms apart.
	reqs := workload(17, 500)
	for i := range reqs {
		reqs[i].ArrivalUS = int64(i/50)*600_000 + int64(i%50)*2000
	}
	reqs = withDependencies(reqs)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := func() config.Cluster {
				c, err := config.Parse("c.yaml", []byte(fmt.Sprintf(pool, tc.autoscaler[1:])))
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			restricted, g := regretRun(t, cfg(), reqs, nil, false)
			whole, gw := regretRun(t, cfg(), reqs, nil, true)
			sameRegretRows(t, restricted, whole)
			if g.restrictedN == 0 || g.cutN == 0 || gw.restrictedN != 0 {
				t.Fatalf("restricted run: %d samples of one-replica forks, %d cut short by the autoscaler; whole run: %d (want > 0, > 0, 0)",
					g.restrictedN, g.cutN, gw.restrictedN)
			}
			t.Logf("%d samples: %d with one-replica forks, %d cut short", len(restricted), g.restrictedN, g.cutN)
		})
	}
}

// sameRegretRows checks that one-replica and whole-cluster forks gave the
// same sampled rows (at least 100), some of them with regret.
func sameRegretRows(t *testing.T, restricted, whole []string) {
	t.Helper()
	if len(restricted) < 100 || len(restricted) != len(whole) {
		t.Fatalf("%d sampled rows with restricted forks, %d with whole forks (want the same, ≥ 100)", len(restricted), len(whole))
	}
	differ := 0
	for i := range restricted {
		if restricted[i] != whole[i] {
			t.Fatalf("row %d:\nrestricted %s\nwhole      %s", i, restricted[i], whole[i])
		}
		if !strings.Contains(restricted[i], " 0 0 [") {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("every sampled decision has zero regret: the comparison shows nothing")
	}
}
