package decision

import (
	"strings"
	"testing"
	"time"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/trace"
)

// A P/D hand-off is a kv_transfer row of the decision trace, and one that
// waited for the decode replica's KV blocks is a pd_backpressure anomaly
// (the case of lib/engine's TestPDBackpressure).
func TestKVTransferDecisionsAndBackpressure(t *testing.T) {
	c := testConfig(1, "round-robin")
	d := c.Resolved()[0]
	d.ID = "d"
	d.Pools = []config.Pool{{Role: "prefill", Replicas: 1}, {Role: "decode", Replicas: 1}}
	d.KV = &config.KV{Offload: "none", BytesPerToken: 1000}
	bw := 1.0
	d.KVTransfer = &config.KVTransfer{Link: "rdma", BandwidthGBs: &bw, Latency: config.Duration(20 * time.Microsecond),
		Granularity: "block", Routing: "decode-first", MaxQueue: 8}
	d.Engine.KVBlocks = 10
	c.Deployments = []config.Deployment{d}
	a, b := trace.NewRequest("a"), trace.NewRequest("b")
	a.ArrivalUS, a.InputTokens, a.OutputTokens = 0, 100, 40
	b.ArrivalUS, b.InputTokens, b.OutputTokens = 10, 60, 2
	models, _, err := engine.Prepare(&c)
	if err != nil {
		t.Fatal(err)
	}
	ds, as := &decisions{}, &anomalies{}
	rec := New(Config{Level: Decisions, Decisions: ds, Anomalies: as})
	opts := engine.Options{CheckInvariants: true}
	rec.Attach(&opts)
	if _, err := engine.Run(c, models, engine.SliceSource([]trace.Request{a, b}), rec.Sink(&results{}), opts); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	var xfers []trace.Decision
	for _, x := range ds.ds {
		if x.Kind == trace.DecisionKVTransfer {
			xfers = append(xfers, x)
		}
	}
	if len(xfers) != 2 || xfers[0].RequestID != "a" || xfers[0].Target != "d/1" || xfers[0].Action != "transfer from d/0" || xfers[0].Value != 7 ||
		xfers[1].RequestID != "b" || xfers[1].Value != 4 || !strings.Contains(xfers[1].Reason, "waited") {
		t.Fatalf("kv_transfer rows %+v", xfers)
	}
	var bp []trace.Anomaly
	for _, x := range as.as {
		if x.Type == trace.AnomalyPDBackpressure {
			bp = append(bp, x)
		}
	}
	if len(bp) != 1 || bp[0].ReplicaID != "d/1" || len(bp[0].Requests) != 1 || bp[0].Requests[0] != "b" || bp[0].Magnitude <= 0 || bp[0].EndUS <= bp[0].TimeUS {
		t.Fatalf("pd_backpressure anomalies %+v", bp)
	}
}
