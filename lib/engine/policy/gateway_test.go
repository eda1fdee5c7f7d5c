package policy

import (
	"math"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/engine/row"
)

func view(b *Board, now int64) *ClusterView { return b.View(now, nil, false) }

func rv(id string, now int64, in int32, prio int32, tenant string) RequestView {
	r := row.NewRequest(id)
	r.InputTokens, r.Priority, r.TenantID = in, prio, tenant
	return NewRequestView(&r, now, nil)
}

// TestTokenBucket: rate 2/s, burst 2. At 0 two requests pass and the third
// is rejected; 250 ms later the bucket holds 0.5 (still short), at 500 ms
// one token is back. Per token: a 3-token prompt needs 3 of burst 4; with
// delay it waits (3 − 1) / 2 s = 1 s for the refill.
func TestTokenBucket(t *testing.T) {
	b := NewBoard([]string{"r"}, []string{"d"}, []string{"monolithic"}, 0)
	p, err := NewAdmission("token-bucket", Params{"rate": 2, "burst": 2}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		now  int64
		want Verdict
	}{{0, Admit}, {0, Admit}, {0, Reject}, {250e3, Reject}, {500e3, Admit}, {500e3, Reject}} {
		if d := p.Admit(rv("x", tc.now, 10, 0, ""), view(b, tc.now)); d.Verdict != tc.want {
			t.Fatalf("step %d at %d: %v (%s), want %v", i, tc.now, d.Verdict, d.Reason, tc.want)
		}
	}
	q, _ := NewAdmission("token-bucket", Params{"rate": 2, "burst": 4, "per_token": 1, "delay": 1}, Env{})
	if d := q.Admit(rv("a", 0, 3, 0, ""), view(b, 0)); d.Verdict != Admit {
		t.Fatalf("first: %+v", d)
	}
	if d := q.Admit(rv("b", 0, 3, 0, ""), view(b, 0)); d.Verdict != Delay || d.DelayUS != 1e6 {
		t.Fatalf("second: %+v, want a delay of 1 s", d)
	}
	if d := q.Admit(rv("b", 1e6, 3, 0, ""), view(b, 1e6)); d.Verdict != Admit {
		t.Fatalf("after the delay: %+v", d)
	}
	if d := q.Admit(rv("c", 1e6, 5, 0, ""), view(b, 1e6)); d.Verdict != Reject || !strings.Contains(d.Reason, "more than the bucket") {
		t.Fatalf("a 5-token prompt in a 4-token bucket: %+v", d)
	}
	// Per tenant: x's empty bucket does not stop y; a clone keeps its own.
	pt, _ := NewAdmission("token-bucket", Params{"rate": 1, "burst": 1, "per_tenant": 1}, Env{})
	pt.Admit(rv("1", 0, 1, 0, "x"), view(b, 0))
	c := Clone(pt)
	if d := pt.Admit(rv("2", 0, 1, 0, "x"), view(b, 0)); d.Verdict != Reject {
		t.Fatalf("x again: %+v", d)
	}
	if d := pt.Admit(rv("3", 0, 1, 0, "y"), view(b, 0)); d.Verdict != Admit {
		t.Fatalf("y: %+v", d)
	}
	if d := c.Admit(rv("3", 0, 1, 0, "y"), view(b, 0)); d.Verdict != Admit {
		t.Fatalf("y in the clone: %+v", d)
	}
}

// TestSaturationDetectors: two replicas, queue (waiting + in flight) 3 and
// 0, KV 40/100 and 90/100; thresholds 5 and 0.8: scores max(0.6, 0.5) = 0.6
// and max(0, 1.125) = 1.125, mean 0.8625. Concurrency: loads 3+2 and 0+7
// over 2 × 10 = 0.6.
func TestSaturationDetectors(t *testing.T) {
	b := NewBoard([]string{"a", "b"}, []string{"d", "d"}, []string{"monolithic", "monolithic"}, 0)
	b.Set(0, ReplicaStatus{Waiting: 2, InFlight: 1, Running: 2, KVUsed: 40, KVTotal: 100})
	b.Set(1, ReplicaStatus{Running: 7, KVUsed: 90, KVTotal: 100})
	if got := b.Utilization(5, 0.8); math.Abs(got-0.8625) > 1e-12 {
		t.Fatalf("utilization %v, want 0.8625", got)
	}
	if got := b.Concurrency(10); math.Abs(got-0.6) > 1e-12 {
		t.Fatalf("concurrency %v, want 0.6", got)
	}
	// tier-shed at saturation 0.8625: with step 0.25, priority −1 sheds
	// from 1 (passes), −2 from 0.75 (shed); 0 is never sheddable.
	p, _ := NewAdmission("tier-shed", Params{"step": 0.25}, Env{})
	for _, tc := range []struct {
		prio int32
		want Verdict
	}{{0, Admit}, {-1, Admit}, {-2, Reject}, {-3, Reject}} {
		if d := p.Admit(rv("x", 0, 1, tc.prio, ""), view(b, 0)); d.Verdict != tc.want {
			t.Errorf("priority %d: %v (%s), want %v", tc.prio, d.Verdict, d.Reason, tc.want)
		}
	}
	if got := NewBoard(nil, nil, nil, 0).Utilization(5, 0.8); !math.IsInf(got, 1) {
		t.Fatalf("empty board: %v, want +Inf (saturated)", got)
	}
}
