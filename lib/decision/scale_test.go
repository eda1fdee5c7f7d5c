package decision

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/autoscale"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/trace"
)

// scripted asks for 2 replicas, then 1, then 2 again: an oscillation.
type scripted struct{}

func (scripted) Recommend(v *autoscale.PoolView, _ []autoscale.PoolView) autoscale.Recommendation {
	switch {
	case v.NowUS >= 30e6:
		return autoscale.Recommendation{Desired: 2, Reason: "script: two again"}
	case v.NowUS >= 20e6:
		return autoscale.Recommendation{Desired: 1, Reason: "script: one"}
	}
	return autoscale.Recommendation{Desired: 2, Reason: "script: two"}
}

// An autoscaler's actions are scale rows of the decision trace, and an
// up/down/up within the window is one scale_oscillation anomaly.
func TestScaleDecisionsAndOscillation(t *testing.T) {
	c, err := config.Parse("c.yaml", []byte(`
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 2000}
    latency: {mode: linear, beta: [1000, 1, 10]}
    pools:
      - role: monolithic
        replicas: 1
        min_replicas: 1
        max_replicas: 3
        autoscaler: {target: 4, interval: 10s, stabilization: {up: 0s, down: 0s}, provisioning: {dist: constant, value: 1s}}
router: {routing: least-loaded}
`))
	if err != nil {
		t.Fatal(err)
	}
	models, _, err := engine.Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []trace.Request
	for i := 0; i < 45; i++ {
		r := trace.NewRequest(fmt.Sprint("r", i))
		r.ArrivalUS, r.InputTokens, r.OutputTokens = int64(i)*1e6, 50, 5
		reqs = append(reqs, r)
	}
	ds, as := &decisions{}, &anomalies{}
	rec := New(Config{Level: Decisions, Decisions: ds, Anomalies: as})
	opts := engine.Options{CheckInvariants: true,
		Policies: cluster.Policies{Autoscale: func(string, int) autoscale.Policy { return scripted{} }}}
	rec.Attach(&opts)
	if _, err := engine.Run(c, models, engine.SliceSource(reqs), rec.Sink(&results{}), opts); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ds.ds {
		if d.Kind == trace.DecisionScale {
			got = append(got, fmt.Sprintf("%d %s %s %d %s", d.TimeUS/1e6, d.Target, d.Action, d.Value, d.Reason))
		}
	}
	want := []string{"10 d/pool0 up 2 script: two", "20 d/pool0 down 1 script: one", "30 d/pool0 up 2 script: two again"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scale rows %q, want %q", got, want)
	}
	if len(as.as) != 1 || as.as[0].Type != trace.AnomalyScaleOscillation || as.as[0].TimeUS != 10e6 || as.as[0].EndUS != 30e6 || as.as[0].ReplicaID != "d/pool0" {
		t.Fatalf("anomalies %+v, want one scale_oscillation from 10 s to 30 s on d/pool0", as.as)
	}
}
