package cluster_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/internal/scenario"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// TestScenarios runs testdata/*.txt: a whole cluster driven through its
// public API (config.Cluster, cluster.New, Inject, Step, InputDone,
// Finish, Options and its sinks), logging what comes out of it in order:
// routing decisions, preemptions and KV transfers (Options.Decisions), step
// rows (Options.Steps), results (the Sink) and scale events
// (docs/engine.md, "Scenario tests"). Invariants are checked throughout
// (Options.CheckInvariants). Commands:
//
//	bundle             a policy bundle (YAML, Starlark inline) for the
//	                   configs that follow
//	config [log=(route, step, result, preempt, transfer, scale, gateway)]
//	                   a cluster from the cluster YAML in the input (the
//	                   latency model comes from latency.beta/alpha, as
//	                   engine.Prepare builds it); log picks the lines shown
//	inject [done]      the input's request lines (at, in, out, deps, delay,
//	                   timeout, kind, prefix, prio, model), in order; done
//	                   also says no more rows will come (InputDone)
//	run [until=µs]     process events up to until (all by default); stops
//	                   with NeedInput at the arrival of the last root injected
//	step [n=1]         process n events, each headed by its time
//	finish             end the run (Finish): what is left is unfinished
//	print              replicas and the requests in flight
func TestScenarios(t *testing.T) {
	scenario.Run(t, func() scenario.Harness { return (&harness{}).do })
}

type harness struct {
	c      *cluster.Cluster
	bundle string // the policy bundle for the next config ("" = the config's router keys)
	cfg    config.Cluster
	log    scenario.Log // the command being run's output: the sinks write here
	show   map[string]bool
	rows   int64 // rows injected
	scales int   // scale-event rows logged
}

var kinds = []string{"route", "step", "result", "preempt", "transfer", "scale", "gateway"}

func (h *harness) do(t *testing.T, td *datadriven.TestData) string {
	a := scenario.Of(t, td)
	h.log.Reset()
	if td.Cmd != "config" && td.Cmd != "bundle" && h.c == nil {
		a.Fatalf("%s before config", td.Cmd)
	}
	switch td.Cmd {
	case "bundle":
		a.Done()
		h.bundle = td.Input
		h.log.Printf("ok")
		return h.log.String()
	case "config":
		show := a.Strs("log")
		a.Done()
		h.config(a, td.Input, show)
	case "inject":
		done := a.Bool("done", false)
		a.Done()
		for _, l := range scenario.Lines(t, td) {
			req := scenario.Request(l.Name, l.Args)
			l.Done()
			h.rows++
			if err := h.c.Inject(&req, h.rows); err != nil {
				h.log.Printf("error: %v", err)
			}
		}
		if done {
			h.c.InputDone()
		}
		if h.log.Len() == 0 {
			h.log.Printf("%d rows injected", h.rows)
		}
	case "run":
		until := a.Int("until", math.MaxInt64)
		a.Done()
		for {
			st := h.c.Step(until)
			h.scaleRows()
			if st == cluster.Stepped {
				continue
			}
			if st == cluster.NeedInput {
				h.log.Printf("t=%d need input: the next event is the arrival of the last root injected", h.c.Now())
			}
			break
		}
		h.errLine()
	case "step":
		n := a.Int("n", 1)
		a.Done()
		for i := int64(0); i < n; i++ {
			before := h.log.String()
			st := h.c.Step(math.MaxInt64)
			h.scaleRows()
			if st != cluster.Stepped {
				if st == cluster.NeedInput {
					h.log.Printf("t=%d need input: the next event is the arrival of the last root injected", h.c.Now())
				} else {
					h.log.Printf("idle: no event left")
				}
				break
			}
			// Head the event's lines with its time.
			lines := strings.TrimSuffix(h.log.String()[len(before):], "\n")
			h.log.Reset()
			h.log.WriteString(before)
			h.log.Printf("event at t=%d", h.c.Now())
			if lines != "" {
				h.log.Printf("  %s", strings.ReplaceAll(lines, "\n", "\n  "))
			}
		}
		h.errLine()
	case "finish":
		a.Done()
		sum, err := h.c.Finish()
		h.scaleRows()
		if err != nil {
			h.log.Printf("error: %v", err)
			break
		}
		h.log.Printf("summary: %d injected: %d completed, %d dropped, %d rejected, %d timed out, %d unfinished; %d steps, %d preemptions; ended at %d",
			sum.Injected, sum.Completed, sum.Dropped, sum.Rejected, sum.TimedOut, sum.Unfinished, sum.Steps, sum.Preemptions, sum.SimEndUS)
		if sum.RouteHolds > 0 {
			h.log.Printf("routing holds: %d requests held, %d holds, %d µs held in all", sum.RouteHeld, sum.RouteHolds, sum.RouteHeldUS)
		}
		if sum.GatewayQueued+sum.GatewayExpired > 0 {
			h.log.Printf("gateway: %d queued, %d µs waited, %d expired", sum.GatewayQueued, sum.GatewayWaitUS, sum.GatewayExpired)
		}
		if sum.Transfers > 0 {
			h.log.Printf("KV transfers: %d, %d bytes", sum.Transfers, sum.TransferBytes)
		}
		if sum.Encodes > 0 {
			h.log.Printf("encodes: %d, %d bytes of embeddings, %d µs from encode routing to arrival in all", sum.Encodes, sum.EncodeBytes, sum.EncodeUS)
		}
		if sum.ScaleUps+sum.ScaleDowns > 0 {
			var gh []string
			for i, g := range sum.GPUHours {
				gh = append(gh, fmt.Sprintf("%s %.3g", sum.Deployments[i].ID, g))
			}
			h.log.Printf("scaling: %d up, %d down; GPU-hours: %s", sum.ScaleUps, sum.ScaleDowns, strings.Join(gh, ", "))
		}
	case "print":
		a.Done()
		h.print()
	default:
		a.Fatalf("unknown command %q", td.Cmd)
	}
	return h.log.String()
}

func (h *harness) config(a *scenario.Args, yaml string, show []string) {
	cfg, err := config.Parse("cluster.yaml", []byte(yaml))
	if err != nil {
		h.log.Printf("error: %v", err)
		return
	}
	models, why, err := engine.Prepare(&cfg)
	if err != nil {
		h.log.Printf("error: %v", err)
		return
	}
	h.show = map[string]bool{}
	if show == nil {
		show = kinds
	}
	for _, k := range show {
		if !slices.Contains(kinds, k) {
			a.Fatalf("log: unknown kind %q (expected some of %s)", k, strings.Join(kinds, ", "))
		}
		h.show[k] = true
	}
	h.cfg, h.rows, h.scales = cfg, 0, 0
	opts := cluster.Options{Steps: steps{h}, CheckInvariants: true, Decisions: h}
	if h.bundle != "" {
		b, err := bundle.Parse("bundle.yaml", []byte(h.bundle), bundle.Env{})
		if err != nil {
			h.log.Printf("error: %v", err)
			return
		}
		rt, err := b.Instantiate(&h.cfg)
		if err != nil {
			h.log.Printf("error: %v", err)
			return
		}
		opts.Policies = rt.Policies()
	}
	h.c, err = cluster.New(&h.cfg, models, results{h}, opts)
	if err != nil {
		h.log.Printf("error: %v", err)
		h.c = nil
		return
	}
	for _, w := range why {
		h.log.Printf("%s", w)
	}
	for _, d := range h.c.Deployments() {
		var ids []string
		for _, i := range d.Replicas {
			p := h.c.Replicas()[i]
			ids = append(ids, fmt.Sprintf("%s (%s, %s)", p.ID, p.Role, p.State))
		}
		h.log.Printf("%s: %d KV blocks of %d tokens per replica; %s", d.ID, d.Engine.KVBlocks, d.Engine.BlockSize, strings.Join(ids, ", "))
	}
}

// errLine logs the run's error, if any.
func (h *harness) errLine() {
	if err := h.c.Err(); err != nil {
		h.log.Printf("error: %v", err)
	}
}

// scaleRows logs the scale-event rows written since the last call.
func (h *harness) scaleRows() {
	rows := h.c.ScaleEvents()
	for ; h.scales < len(rows); h.scales++ {
		if !h.show["scale"] {
			continue
		}
		e := &rows[h.scales]
		s := fmt.Sprintf("t=%d scale %s pool %d %s", e.TimeUS, e.Deployment, e.Pool, e.Action)
		if e.ReplicaID != "" {
			s += " " + e.ReplicaID
		}
		if e.Action == row.ScaleUp || e.Action == row.ScaleDown {
			s += fmt.Sprintf(" %d -> %d", e.From, e.To)
		}
		s += fmt.Sprintf(": %d billed, %d ready", e.Replicas, e.Ready)
		if e.ProvisioningUS > 0 {
			s += fmt.Sprintf("; provisioning %d µs, warm at %d", e.ProvisioningUS, e.WarmEndUS)
		}
		if e.Reason != "" {
			s += " (" + e.Reason + ")"
		}
		h.log.Printf("%s", s)
	}
}

func (h *harness) print() {
	h.log.Printf("t=%d", h.c.Now())
	for _, p := range h.c.Replicas() {
		l := p.Sched.Load()
		h.log.Printf("%s %s %s: %d waiting, %d running, %d in flight; kv %d/%d; %s", p.ID, p.Role, p.State,
			l.Waiting, l.Running, p.InFlight, l.KVUsed, l.KVTotal, scenario.Plural(p.Steps, "step"))
	}
	h.c.EachLive(func(r *request.State) {
		where := ""
		if r.Replica >= 0 {
			where = " on " + h.c.Replicas()[r.Replica].ID
		}
		h.log.Printf("%s %s%s", r.Req.ID, scenario.Phase(r.Phase), where)
	})
}

// results is the cluster's Sink.
type results struct{ h *harness }

func (s results) Write(r *row.Result) error {
	if !s.h.show["result"] {
		return nil
	}
	line := fmt.Sprintf("t=%d %s %s", s.h.c.Now(), r.ID, r.Status)
	if r.ReplicaID != "" {
		line += " on " + r.ReplicaID
	}
	if r.DropReason != "" {
		line += " (" + r.DropReason + ")"
	}
	var parts []string
	for _, f := range []struct {
		name string
		v    int64
	}{{"arrival", r.ArrivalUS}, {"routed", r.RoutedUS}, {"enqueued", r.EnqueuedUS}, {"scheduled", r.FirstScheduledUS},
		{"first token", r.FirstTokenUS}, {"finished", r.FinishedUS}} {
		if f.v != row.Null {
			parts = append(parts, fmt.Sprintf("%s %d", f.name, f.v))
		}
	}
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	if r.Kind == row.KindLLM {
		line += fmt.Sprintf("; %d/%d tokens", r.GeneratedTokens, r.OutputTokens)
	}
	if r.CachedTokens > 0 {
		line += fmt.Sprintf(", %d cached", r.CachedTokens)
	}
	if r.Preemptions > 0 {
		line += ", " + scenario.Plural(int64(r.Preemptions), "preemption")
	}
	if r.PrefillReplica != "" {
		line += fmt.Sprintf("; prefill %s, decode %s, transfer %d µs (%d waiting), %d bytes", r.PrefillReplica, r.DecodeReplica,
			r.KVTransferUS, r.KVTransferWaitUS, r.KVTransferBytes)
	}
	s.h.log.Printf("%s", line)
	return nil
}

// steps is the cluster's StepSink.
type steps struct{ h *harness }

func (s steps) Write(st *row.Step) error {
	if !s.h.show["step"] {
		return nil
	}
	line := fmt.Sprintf("t=%d step %s #%d [%d, %d): batch %d (prefill %d, decode %d), kv %d/%d, %d waiting, %d running",
		st.StartUS+st.DurationUS, st.ReplicaID, st.StepIndex, st.StartUS, st.StartUS+st.DurationUS, st.BatchSize,
		st.PrefillTokens, st.DecodeTokens, st.KVBlocksUsed, st.KVBlocksTotal, st.Waiting, st.Running)
	if st.Preempted > 0 {
		line += fmt.Sprintf(", %d preempted", st.Preempted)
	}
	s.h.log.Printf("%s", line)
	return nil
}

// The harness is the cluster's Decisions.

func (h *harness) Admitted(now int64, r *request.State, d policy.AdmitDecision, _ *policy.ClusterView) {
	if d.Verdict != policy.Admit && h.show["route"] {
		s := fmt.Sprintf("t=%d %s %s", now, r.Req.ID, d.Verdict)
		if d.Verdict == policy.Delay {
			s += fmt.Sprintf(" %d µs", d.DelayUS)
		}
		h.log.Printf("%s: %s", s, d.Reason)
	}
}

func (h *harness) Prioritized(int64, *request.State, float64, *policy.ClusterView) {}

func (h *harness) Routed(now int64, r *request.State, d policy.RouteDecision, v *policy.ClusterView, cands []int32) {
	if !h.show["route"] {
		return
	}
	if d.Wait {
		h.log.Printf("t=%d hold %s for %d µs (%s); %d held before it", now, r.Req.ID, d.WaitUS, d.Reason, v.Held())
		return
	}
	h.log.Printf("t=%d route %s -> %s (%s)", now, r.Req.ID, h.c.Replicas()[cands[d.Target]].ID, d.Reason)
}

func (h *harness) Preempted(now int64, rep *replica.Replica, victim *request.State) {
	if h.show["preempt"] {
		h.log.Printf("t=%d preempt %s on %s", now, victim.Req.ID, rep.ID)
	}
}

func (h *harness) Batch(*row.Step)      {}
func (h *harness) WantBatches() bool    { return false }
func (h *harness) Anomaly(*row.Anomaly) {}

// Scale decisions are logged from the scale-events rows (scaleRows).
func (h *harness) Scale(int64, string, string, string, string, int) {}

func (h *harness) Disagg(now int64, r *request.State, kind string, v *policy.ClusterView, target int, action, reason string, value int64) {
	if h.show["route"] {
		h.log.Printf("t=%d %s %s -> %s: %s (%s)", now, kind, r.Req.ID, v.Replica(target).ID(), action, reason)
	}
}

func (h *harness) FlowControl(now int64, r *request.State, action, reason string, value int64) {
	if h.show["gateway"] {
		h.log.Printf("t=%d gateway %s %s: %s", now, action, r.Req.ID, reason)
	}
}

func (h *harness) KVTransfer(now int64, r *request.State, from, to string, blocks int64, reason string) {
	if h.show["transfer"] {
		h.log.Printf("t=%d transfer %s %s -> %s: %d blocks, %s", now, r.Req.ID, from, to, blocks, reason)
	}
}
