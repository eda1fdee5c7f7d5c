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
