package summary

import (
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// TestAdviceFollowsTheRun: a suggestion depends on what ran and never
// tells the run to do what it already does (the summary once told a bundle
// already using priority scheduling to "use scheduling_policy: priority").
func TestAdviceFollowsTheRun(t *testing.T) {
	inv := &Cluster{Type: trace.AnomalyPriorityInversion, Replica: "d/0", Count: 7}
	storm := &Cluster{Type: trace.AnomalyPreemptionStorm, Replica: "d/1", Count: 2}
	shadow := &Cluster{Type: trace.AnomalyShadowDivergence, Replica: "d/0", Count: 5}
	for _, tc := range []struct {
		name    string
		ri      runInfo
		c       *Cluster
		shadow  [2]int64
		want    string
		notWant string
	}{
		{"fcfs", runInfo{hasDeployments: true, sched: []string{"fcfs"}, priority: "request"}, inv, [2]int64{}, "set scheduling_policy: priority", ""},
		{"priority by a bundle stage", runInfo{hasDeployments: true, sched: []string{"priority"}, stages: map[string]string{"priority": "decision_tree"}}, inv, [2]int64{},
			"the bundle's priority stage (decision_tree)", "set scheduling_policy"},
		{"priority, fcfs stage", runInfo{hasDeployments: true, sched: []string{"priority"}, priority: "fcfs", stages: map[string]string{}}, inv, [2]int64{}, "router.priority: request", "set scheduling_policy"},
		{"priority by the column", runInfo{hasDeployments: true, sched: []string{"priority"}, priority: "request", stages: map[string]string{}}, inv, [2]int64{}, "already order by priority", "set scheduling_policy"},
		{"storm, router weighs kv", runInfo{router: "least-kv", signals: "load,kv"}, storm, [2]int64{}, "already weighs KV use", "weigh it ("},
		{"storm, router blind to kv", runInfo{router: "least-loaded", signals: "load"}, storm, [2]int64{}, "does not weigh KV use", "already weighs"},
		{"shadow, router blind to prefix", runInfo{router: "least-loaded", signals: "load"}, shadow, [2]int64{0, 5}, "informational", "trust"},
		{"shadow, late events", runInfo{router: "prefix-affinity", signals: "load,prefix", kvDelayUS: 50000}, shadow, [2]int64{1, 4}, "50 ms late (kv_event_delay)", "evicted"},
		{"shadow, evictions", runInfo{router: "prefix-affinity", signals: "load,prefix", kvDelayUS: 0}, shadow, [2]int64{4, 1}, "evicted", "late"},
	} {
		s := &writer{ri: tc.ri}
		if s.ri.stages == nil {
			s.ri.stages = map[string]string{}
		}
		got := s.advise(tc.c, tc.shadow)
		if !strings.Contains(got, tc.want) || tc.notWant != "" && strings.Contains(got, tc.notWant) {
			t.Errorf("%s: %q\nwant %q, not %q", tc.name, got, tc.want, tc.notWant)
		}
	}
}

// TestPatternMining: a feature present in every bad decision and rarely
// otherwise is found, with its counts and lift; noise is not.
func TestPatternMining(t *testing.T) {
	m := newMiner()
	for i := 0; i < 200; i++ {
		d := &Decision{Seq: int64(i + 1), Target: "d/" + string(rune('0'+i%3)), Tenant: "t", Class: "c", Reason: "r",
			Waiting: 0, CacheHit: 0, ExpectedHit: 0, TTFTUS: 100}
		d.Candidates = []trace.Candidate{{ReplicaID: d.Target, Waiting: 0, CachedBlocks: 0}, {ReplicaID: "x", Waiting: 0, CachedBlocks: 0}}
		if i%10 == 0 { // the 20 bad ones: deep queues on the chosen replica
			d.TTFTUS, d.Waiting = 5000+int64(i), 12
			d.Candidates[0].Waiting = 12
		}
		m.add(d, "none", trace.StatusCompleted, 0, 0)
	}
	pats, w, cut, inc := m.mine(20)
	if w != 20 || cut != 5000 || inc != 0 || len(pats) == 0 {
		t.Fatalf("worst %d, cut %d, incomplete %d, patterns %+v", w, cut, inc, pats)
	}
	p := pats[0]
	if !strings.Contains(p.Name, "requests waiting") || p.Worst != 20 || p.All != 20 || p.Lift != 10 || p.Examples[0] != 191 {
		t.Fatalf("top pattern %+v", p)
	}
	for _, q := range pats {
		if strings.Contains(q.Name, "routed to") {
			t.Fatalf("a target spread evenly over the bad and the good is not a pattern: %+v", q)
		}
	}
}
