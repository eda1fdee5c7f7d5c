package report

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

func writeScaleEvents(t *testing.T, rows []trace.ScaleEvent) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scale.arrow")
	schema := trace.ScaleEventsSchema(trace.NewMeta())
	out, err := trace.Create(p, nil, schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := trace.WriteScaleEvents(out, schema, rows); err != nil {
		t.Fatal(err)
	}
	return p
}

// GPU-hours and cost by hand: 2 GPUs per replica at $2.50; 2 replicas for
// 30 min, 3 for 5 min, 2 for 200 s, 3 for 1,300 s:
// 2·2·0.5 + 3·2·300/3600 + 2·2·200/3600 + 3·2·1300/3600 = 4.8889 GPU-hours,
// $12.22. The up at 1,800 s, down at 2,100 s and up at 2,300 s is a
// scale_oscillation (500 s apart, within 600 s).
func TestScaleEventsGPUHours(t *testing.T) {
	row := func(ts int64, action string, replicas int32) trace.ScaleEvent {
		e := trace.ScaleEvent{TimeUS: ts * 1e6, Deployment: "d", Action: action, Replicas: replicas, Ready: replicas,
			GPUsPerReplica: 2, GPUHourUSD: 2.5, ProvisioningUS: trace.Null, WarmEndUS: trace.Null}
		for _, f := range []*float64{&e.QueueDepth, &e.Running, &e.Utilization, &e.KVUtilization, &e.RequestRate, &e.SLOAttainment} {
			*f = math.NaN()
		}
		return e
	}
	p := writeScaleEvents(t, []trace.ScaleEvent{row(0, trace.ScaleStart, 2), row(1800, trace.ScaleUp, 3),
		row(2100, trace.ScaleDown, 2), row(2300, trace.ScaleUp, 3), row(3600, trace.ScaleEnd, 3)})
	rep, err := Build([]string{"testdata/small.results.arrows"}, Options{ScaleEvents: p})
	if err != nil {
		t.Fatal(err)
	}
	var tab *Table
	for _, x := range rep.Tables {
		if x.Name == "autoscaling" {
			tab = x
		}
	}
	if tab == nil || len(tab.Rows) != 1 {
		t.Fatalf("no autoscaling table: %+v", rep.Tables)
	}
	got := map[string]string{}
	for i, c := range tab.Columns {
		got[c] = tab.Rows[0][i].String()
	}
	want := map[string]string{"scale_ups": "2", "scale_downs": "1", "min_replicas": "2", "max_replicas": "3",
		"gpu_hours": "4.889", "cost_usd": "12.22", "oscillations": "1", "mean_replicas": "2.44"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	notes := strings.Join(rep.Notes, "\n")
	if !strings.Contains(notes, "scale_oscillation: pool d/0 scaled up, down, up between 1800 s and 2300 s") {
		t.Fatalf("notes: %s", notes)
	}
	var html strings.Builder
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), `id="replicas"`) && !strings.Contains(html.String(), "Replicas (billed") {
		t.Fatal("no replicas chart in the HTML report")
	}
}

func TestScaleEventsBadTable(t *testing.T) {
	if _, err := Build([]string{"testdata/small.results.arrows"}, Options{ScaleEvents: "testdata/small.results.arrows"}); err == nil ||
		!strings.Contains(err.Error(), "scale_events") {
		t.Fatalf("a results table as --scale-events: %v", err)
	}
}

// gpu_hours and cost_usd: a static cluster pays for every replica's GPUs
// over the span; an autoscaled one what its scale-events table says.
func TestBilledMetrics(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, d trace.SimDeployment) string {
		md := trace.NewMeta()
		md.SetSimDeployments([]trace.SimDeployment{d})
		p := filepath.Join(dir, name)
		writeResultsMeta(t, p, smallRows(), md)
		return p
	}
	static := trace.SimDeployment{ID: "d", Model: "qwen3-32b", GPU: "h100", TP: 2, Replicas: 2}
	priced := static
	priced.GPUHourUSD = 3
	auto := priced
	auto.Autoscaled = true
	// Heterogeneous pools: 1 prefill replica at TP4 ($4/GPU-hour) and 2
	// decode replicas at TP1 (the deployment's $3).
	hetero := priced
	hetero.Pools = []trace.SimPool{{Role: "prefill", GPU: "h200", TP: 4, Replicas: 1, GPUHourUSD: 4}, {Role: "decode", GPU: "h100", TP: 1, Replicas: 2, GPUHourUSD: 3}}
	scale := func() string {
		row := func(ts int64, action string, replicas int32) trace.ScaleEvent {
			e := trace.ScaleEvent{TimeUS: ts * 1e6, Deployment: "d", Action: action, Replicas: replicas, Ready: replicas,
				GPUsPerReplica: 2, GPUHourUSD: 2.5, ProvisioningUS: trace.Null, WarmEndUS: trace.Null}
			for _, f := range []*float64{&e.QueueDepth, &e.Running, &e.Utilization, &e.KVUtilization, &e.RequestRate, &e.SLOAttainment} {
				*f = math.NaN()
			}
			return e
		}
		return writeScaleEvents(t, []trace.ScaleEvent{row(0, trace.ScaleStart, 2), row(1800, trace.ScaleUp, 3),
			row(2100, trace.ScaleDown, 2), row(2300, trace.ScaleUp, 3), row(3600, trace.ScaleEnd, 3)})
	}
	// smallRows spans 0 → 1,702,000 µs: 2 replicas × 2 GPUs × 1.702 s.
	const span = 4 * 1.702 / 3600
	for _, tc := range []struct {
		name, path, scale, metric, kind string
		want                            float64
		err                             string
	}{
		{"static gpu-hours", write("static.arrow", static), "", "gpu_hours", "", span, ""},
		{"static cost", write("priced.arrow", priced), "", "cost_usd", "", 3 * span, ""},
		{"no price", write("static2.arrow", static), "", "cost_usd", "", 0, "deployment d has no price: set gpu_hour_usd"},
		{"heterogeneous gpu-hours", write("hetero.arrow", hetero), "", "gpu_hours", "", 6 * 1.702 / 3600, ""},
		{"heterogeneous cost", write("hetero2.arrow", hetero), "", "cost_usd", "", (4*4 + 2*3) * 1.702 / 3600, ""},
		{"autoscaled without events", write("auto.arrow", auto), "", "gpu_hours", "", 0, "deployment d is autoscaled"},
		{"autoscaled gpu-hours", write("auto2.arrow", auto), scale(), "gpu_hours", "", 4.888889, ""},
		{"autoscaled cost", write("auto3.arrow", auto), scale(), "cost_usd", "", 12.222222, ""},
		{"scoped", write("static3.arrow", static), "", "gpu_hours", ScopeTenant, 0, "takes no scope"},
		{"no deployments", func() string { p := filepath.Join(dir, "bare.arrow"); writeResults(t, p, smallRows()); return p }(), "", "gpu_hours", "", 0, "needs the deployments blis-sim records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Build([]string{tc.path}, Options{ScaleEvents: tc.scale})
			if err != nil {
				t.Fatal(err)
			}
			got, err := rep.Metric(0, tc.metric, tc.kind, "a")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || math.Abs(got-tc.want) > 1e-6*tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
