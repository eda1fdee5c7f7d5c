package engine

import (
	"fmt"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// scaled is an autoscaled pool of a linear-latency deployment; %s is the
// autoscaler's extra keys.
const scaled = `
deployments:
  - id: d
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: 2000}
    latency: {mode: linear, beta: [1000, 1, 10]}
    pools:
      - role: monolithic
        replicas: %d
        min_replicas: %d
        max_replicas: %d
        autoscaler: {%s}
router: {routing: %s}
`

func scaledConfig(t *testing.T, replicas, lo, hi int, routing, keys string) (config.Cluster, []latency.Model) {
	t.Helper()
	return parse(t, fmt.Sprintf(scaled, replicas, lo, hi, keys, routing))
}

// stepLoad is rate1 req/s until t1 (s), then rate2 until t2.
func stepLoad(rate1, t1, rate2, t2 float64, in, out int32) []trace.Request {
	var reqs []trace.Request
	n := 0
	for t := 0.0; t < t2-1e-9; {
		reqs = append(reqs, req(fmt.Sprint("r", n), int64(t*1e6+0.5), in, out))
		n++
		if t < t1-1e-9 {
			t = float64(n) / rate1
			if t >= t1 {
				t = t1
			}
		} else {
			t += 1 / rate2
		}
	}
	return reqs
}

func runScaled(t *testing.T, c config.Cluster, models []latency.Model, reqs []trace.Request) (*memSink, Summary, []trace.ScaleEvent) {
	t.Helper()
	sink := &memSink{}
	var rows []trace.ScaleEvent
	opts := Options{CheckInvariants: true, ScaleEventsTo: func(r []trace.ScaleEvent) { rows = r }}
	sum, err := Run(c, models, SliceSource(reqs), sink, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sink, sum, rows
}

// A step from 2 to 20 req/s at 100 s. hpa on request_rate, target 5 per
// replica, evaluated every 10 s over a 10 s window: the evaluation at 110 s
// is the first to see 20 req/s and recommends ceil(1 × 20/5) = 4, but the
// scale-up stabilisation window of 30 s holds the count at the lowest
// recommendation of (80 s, 110 s], which includes 1 from 90 s and 100 s;
// at 130 s every recommendation of (100 s, 130 s] is 4, and the pool goes
// from 1 to 4. The new replicas serve exactly provisioning (60 s) + weight
// load (16 GB at 2 GB/s = 8 s) later: 198 s.
func TestHPAStepLoadExact(t *testing.T) {
	c, models := scaledConfig(t, 1, 1, 8, "least-loaded", `policy: hpa, interval: 10s, metric: request_rate, target: 5,
          stabilization: {up: 30s, down: 300s}, provisioning: {dist: constant, value: 60s},
          weight_load: {bytes: 16e9, bandwidth_gb_s: 2}`)
	reqs := stepLoad(2, 100, 20, 220, 10, 5)
	sink, sum, rows := runScaled(t, c, models, reqs)
	if sum.Completed != int64(len(reqs)) {
		t.Fatalf("completed %d of %d", sum.Completed, len(reqs))
	}
	var up *trace.ScaleEvent
	firstServing := int64(-1)
	for i := range rows {
		r := &rows[i]
		if r.Action == trace.ScaleUp && up == nil {
			up = r
		}
		if r.Action == trace.ScaleServing && firstServing < 0 {
			firstServing = r.TimeUS
		}
	}
	if up == nil {
		t.Fatalf("no scale-up: %+v", rows)
	}
	if up.TimeUS != 130e6 || up.From != 1 || up.To != 4 {
		t.Fatalf("scale-up at %d µs from %d to %d, want 130 s from 1 to 4 (%s)", up.TimeUS, up.From, up.To, up.Reason)
	}
	if up.ProvisioningUS != 68e6 || up.WarmEndUS != 198e6 {
		t.Fatalf("provisioning %d µs, warm at %d µs; want 68 s and 198 s", up.ProvisioningUS, up.WarmEndUS)
	}
	if firstServing != 198e6 {
		t.Fatalf("first new replica serving at %d µs, want 198 s", firstServing)
	}
	if up.RequestRate != 20 {
		t.Fatalf("rate seen %g, want 20", up.RequestRate)
	}
	// No request reached a new replica before it served.
	for _, r := range sink.rs {
		if r.ReplicaID != "d/0" && r.RoutedUS < 198e6 {
			t.Fatalf("%s routed to %s at %d µs, before it served", r.ID, r.ReplicaID, r.RoutedUS)
		}
	}
}
