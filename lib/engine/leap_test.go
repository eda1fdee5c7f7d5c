package engine

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

// Leaping (docs/engine.md, "Leaping") must change nothing but the number
// of events: these tests run the same cluster with spans and one step at
// a time (Options.NoLeap) and compare every result, in order, the summary
// and the scale events.

// leapModels are step models whose ramps differ in shape: constant
// (linear), the roofline's with host work (H100), with TP all-reduces
// (TP2), over a MoE, and a fitted model over roofline features.
var leapModels = sync.OnceValues(func() ([]latency.Model, error) {
	var out []latency.Model
	for _, d := range []struct {
		model, gpu string
		tp         int
		mode       string
	}{
		{"llama-3.1-8b", "h100", 1, "roofline"},
		{"qwen3-32b", "h100", 2, "roofline"},
		{"gpt-oss-120b", "h100", 1, "roofline"},
		{"llama-3.1-8b", "rtx4090", 1, "fitted"},
	} {
		c := config.Default()
		c.Model, c.GPU, c.TP, c.Latency.Mode = d.model, d.gpu, d.tp, d.mode
		ms, _, err := Prepare(&c)
		if err != nil {
			return nil, err
		}
		out = append(out, ms[0])
	}
	return out, nil
})

// leapCase runs c both ways and fails on any difference; it returns the
// leaping run's summary.
func leapCase(t *testing.T, c config.Cluster, models []latency.Model, reqs []row.Request, opts Options) (Summary, bool) {
	t.Helper()
	return sameRuns(t, c, models, reqs, opts, [2]string{"leaping", "stepping"}, func(o *Options, second bool) { o.NoLeap = second })
}

// sameRuns runs c twice, opts changed by vary for each (second false, then
// true), and fails on any difference in results, summary (but its event
// and span counts), scale events or decisions; it returns the first run's
// summary. A run refused the same way both times returns false; names
// name the two runs in messages.
func sameRuns(t *testing.T, c config.Cluster, models []latency.Model, reqs []row.Request, opts Options, names [2]string, vary func(o *Options, second bool)) (Summary, bool) {
	t.Helper()
	type outcome struct {
		sink  memSink
		sum   Summary
		scale []row.ScaleEvent
		trace *traceLog
		err   error
	}
	runOnce := func(second bool) *outcome {
		o := &outcome{}
		op := opts
		vary(&op, second)
		if opts.Decisions != nil { // a fresh trace for each run
			o.trace = &traceLog{}
			op.Decisions = o.trace
		}
		op.CheckInvariants = true
		op.ScaleEventsTo = func(rs []row.ScaleEvent) { o.scale = rs }
		o.sum, o.err = Run(c, models, SliceSource(reqs), &o.sink, op)
		return o
	}
	a, b := runOnce(false), runOnce(true)
	na, nb := names[0], names[1]
	var re *row.RowError
	if errors.As(b.err, &re) {
		if a.err == nil || a.err.Error() != b.err.Error() {
			t.Fatalf("%s failed with %v, %s with %v", nb, b.err, na, a.err)
		}
		return a.sum, false
	}
	if b.err != nil || a.err != nil {
		if b.err != nil && a.err != nil && b.err.Error() == a.err.Error() {
			return a.sum, false // a config the engine refuses either way
		}
		t.Fatalf("%s: %v; %s: %v", nb, b.err, na, a.err)
	}
	if len(a.sink.rs) != len(b.sink.rs) {
		t.Fatalf("%d results %s, %d %s", len(a.sink.rs), na, len(b.sink.rs), nb)
	}
	for i := range b.sink.rs {
		if !reflect.DeepEqual(a.sink.rs[i], b.sink.rs[i]) {
			t.Fatalf("result %d differs:\n%s %+v\n%s %+v", i, na, a.sink.rs[i], nb, b.sink.rs[i])
		}
	}
	as, bs := a.sum, b.sum
	if names[1] == "stepping" && as.Events > bs.Events {
		t.Errorf("leaping took %d events, stepping %d", as.Events, bs.Events)
	}
	as.Events, bs.Events = 0, 0
	as.Spans, bs.Spans = 0, 0
	if !reflect.DeepEqual(as, bs) {
		t.Fatalf("summaries differ:\n%s %+v\n%s %+v", na, as, nb, bs)
	}
	if fmt.Sprint(a.scale) != fmt.Sprint(b.scale) { // NaN metrics: compared as printed
		t.Fatalf("scale events differ:\n%s %+v\n%s %+v", na, a.scale, nb, b.scale)
	}
	if a.trace != nil {
		l, s := a.trace.lines, b.trace.lines
		for i := range min(len(l), len(s)) {
			if l[i] != s[i] {
				t.Fatalf("decision %d differs:\n%s %s\n%s %s", i, na, l[i], nb, s[i])
			}
		}
		if len(l) != len(s) {
			t.Fatalf("%d decisions %s, %d %s", len(l), na, len(s), nb)
		}
	}
	return a.sum, true
}

// traceLog is a decision trace as text: every decision with the view it
// was taken on (each candidate's status, as the decisions table has it,
// read through the view as the recorder reads it).
type traceLog struct{ lines []string }

func (l *traceLog) view(v *policy.ClusterView) string {
	var b strings.Builder
	for i := range v.Len() {
		r := v.Replica(i)
		fmt.Fprintf(&b, " [%s %s w%d r%d f%d kv%d/%d c%d]", r.ID(), r.State(), r.Waiting(), r.Running(), r.InFlight(), r.KVUsed(), r.KVTotal(), v.CachedBlocks(i))
	}
	return b.String()
}

func (l *traceLog) add(format string, a ...any) { l.lines = append(l.lines, fmt.Sprintf(format, a...)) }

func (l *traceLog) Admitted(now int64, r *request.State, d policy.AdmitDecision, v *policy.ClusterView) {
	l.add("%d admit %s %+v%s", now, r.Req.ID, d, l.view(v))
}
func (l *traceLog) Prioritized(now int64, r *request.State, prio float64, v *policy.ClusterView) {
	l.add("%d priority %s %v%s", now, r.Req.ID, prio, l.view(v))
}
func (l *traceLog) Routed(now int64, r *request.State, d policy.RouteDecision, v *policy.ClusterView, cands []int32) {
	l.add("%d route %s %+v %v%s", now, r.Req.ID, d, cands, l.view(v))
}
func (l *traceLog) Preempted(now int64, rep *replica.Replica, victim *request.State) {
	l.add("%d preempt %s %s", now, rep.ID, victim.Req.ID)
}
func (l *traceLog) Batch(*row.Step)   {}
func (l *traceLog) WantBatches() bool { return false }
func (l *traceLog) Scale(now int64, deployment, replicaID, action, reason string, replicas int) {
	l.add("%d scale %s %s %s %s %d", now, deployment, replicaID, action, reason, replicas)
}
func (l *traceLog) KVTransfer(now int64, r *request.State, from, to string, blocks int64, reason string) {
	l.add("%d kv-transfer %s %s %s %d %s", now, r.Req.ID, from, to, blocks, reason)
}
func (l *traceLog) FlowControl(now int64, r *request.State, action, reason string, value int64) {
	l.add("%d flow %s %s %s %d", now, r.Req.ID, action, reason, value)
}
func (l *traceLog) Anomaly(a *row.Anomaly) { l.add("anomaly %+v", *a) }
func (l *traceLog) Disagg(now int64, r *request.State, kind string, v *policy.ClusterView, target int, action, reason string, value int64) {
	l.add("%d %s %s %s %d %s %d %s", now, kind, r.Req.ID, action, target, reason, value, l.view(v))
}

// FuzzLeap is FuzzRun's cluster space (gateway flow control and DP/EP/PP
// with it) with more step models and the features that read a replica
// mid-span: a horizon, router snapshots, client timeouts, the client cap,
// the router's indexes on small groups; for inputs of even length, every
// decision with the view it was taken on is compared too.
func FuzzLeap(f *testing.F) {
	f.Add([]byte("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01\x05\xff\x30\x00\x05\x02\x02"), uint8(30), uint8(0), uint8(0))
	f.Add([]byte("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02\x00\x90\x60\x01\x02\x03\x00"), uint8(12), uint8(1), uint8(0x21))
	f.Add([]byte("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01\x05\xff\x30\x00\x05\x02\x02\x30\xff\x70\x01\x02\x00\x01\x40\x90\x60\x01\x02\x03\x00"), uint8(0x80), uint8(1), uint8(0x12))
	f.Add([]byte("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02\x30\x90\x60\x01\x02\x03\x00\x20\x90\x60\x01\x02\x03\x00"), uint8(0x85), uint8(0x82), uint8(0x43))
	f.Add([]byte("\x10\x90\xff\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02"), uint8(0x87), uint8(2), uint8(0x94))
	f.Add([]byte("\x04\xc8\x77\x01\x01\x01\x01\x04\xc8\x77\x05\x01\x01\x01\x04\xc8\x77\x09\x01\x01\x01"), uint8(0x3f), uint8(3), uint8(0x31))
	f.Add([]byte("\x04\xc8\x77\x01\x01\x01\x01\x04\xc8\x77\x05\x01\x01\x01\x04\xc8\x77\x09\x01\x01\x01"), uint8(0x60), uint8(0x45), uint8(0x0a))
	// Gateway flow control with a client cap; DP/EP/PP with a horizon.
	f.Add([]byte(strings.Repeat("\x00\x90\x60\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02\x00\x90\x60\x01\x02\x03\x00", 4)), uint8(0x0a), uint8(0x25), uint8(0x60))
	f.Add([]byte(strings.Repeat("\x10\x90\xff\x01\x02\x03\x00\x00\x90\x60\x01\x02\x03\x01\x00\x90\x60\x01\x02\x03\x02", 4)), uint8(0x8b), uint8(0x2b), uint8(0x28))
	f.Add([]byte(strings.Repeat("\x01\x40\x20\x01\x00\x00\x00\x02\x80\x40\x04\x01\x01\x01", 4)), uint8(0x0e), uint8(0x1c), uint8(0x48))
	f.Fuzz(func(t *testing.T, b []byte, kv, routing, extra uint8) {
		c, models, reqs := fuzzCase(t, b, kv, routing)
		ms, err := leapModels()
		if err != nil {
			t.Fatal(err)
		}
		if k := int(extra & 7); k > 0 && k <= len(ms) {
			m := latency.WithAlpha(ms[k-1], latency.Alpha{QueueBase: 10, QueuePerInputToken: 0.5, PerOutputToken: 2})
			for i := range models {
				models[i] = m
			}
		}
		var opts Options
		if extra&0x08 != 0 {
			c.Horizon = config.Duration(int64(extra>>4+1) * 40e6) // 40 ms steps, in ns
		}
		if extra&0x10 != 0 && extra&0x40 == 0 {
			c.SnapshotInterval = config.Duration(int64(kv%7+1) * 1e6)
		}
		if extra&0x20 != 0 {
			c.ClientTimeout = config.Duration(int64(routing%13+1) * 10e6)
		}
		if extra&0x40 != 0 {
			opts.MaxInFlight = 1 + int(routing>>2)%4 // the client cap
		}
		if extra&0x80 != 0 {
			opts.RouterIndexes = 1
		}
		if len(b)%2 == 0 {
			opts.Decisions = &traceLog{} // every decision and its view compared too
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("the generated config is invalid: %v", err)
		}
		leapCase(t, c, models, reqs, opts)
	})
}

// Long decodes on many lightly loaded replicas: nearly every step is in a
// span, and the run takes a few events per request.
func TestLeapFewEvents(t *testing.T) {
	ms, err := leapModels()
	if err != nil {
		t.Fatal(err)
	}
	for _, routing := range []string{"round-robin", "least-loaded", "least-kv", "prefix-affinity", "weighted", "power-of-two"} {
		c := config.Default()
		c.Replicas = 40
		c.Engine.KVBlocks = 2000
		c.Router.Routing = routing
		reqs := benchWorkload(400, 40)
		addSystemPrompts(reqs)
		sum, _ := leapCase(t, c, ms[:1], reqs, Options{})
		if sum.Events > 12*400 || sum.Steps < 50*400 || sum.Spans == 0 {
			t.Errorf("%s: %d events for %d steps in %d spans: expected most steps in spans", routing, sum.Events, sum.Steps, sum.Spans)
		}
	}
}

// slowed embeds a leapable model and changes its step time: the ramp it
// inherits is not its own, and the engine must not leap with it.
type slowed struct{ latency.Linear }

func (m *slowed) StepTime(b *latency.Batch) int64 { return 2*m.Linear.StepTime(b) + 7 }

func TestLeapNotWithAnInheritedRamp(t *testing.T) {
	c := testConfig()
	c.Replicas = 2
	reqs := benchWorkload(60, 20)
	m := &slowed{Linear: latency.Linear{Beta0: 1000, Beta1: 1, Beta2: 10}}
	sum, _ := leapCase(t, c, []latency.Model{m}, reqs, Options{})
	if sum.Spans != 0 {
		t.Errorf("%d spans with a ramp that is not the model's", sum.Spans)
	}
	// The same model with its own ramp leaps.
	sum, _ = leapCase(t, c, []latency.Model{&m.Linear}, reqs, Options{})
	if sum.Spans == 0 {
		t.Error("no span with the linear model")
	}
}
