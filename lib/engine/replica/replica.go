// Package replica is one serving replica: an engine (scheduler, KV store,
// latency model) with an identity and a lifecycle. The cluster drives it
// with Start and End and applies the effects End returns (finished
// requests, the step row); a replica never touches the cluster.
package replica

import (
	"fmt"

	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
)

// State is a replica's lifecycle state; without autoscaling every
// replica is Serving (lib/engine/cluster/scale.go drives the others).
type State uint8

// Lifecycle states, in order.
const (
	Provisioning State = iota // acquiring a GPU: not yet loading weights
	Warming                   // serving, slower and with a cold cache
	Serving
	Draining // finishing its work, taking no new requests
	Stopped
)

var stateNames = [...]string{"provisioning", "warming", "serving", "draining", "stopped"}

func (s State) String() string { return stateNames[s] }

// Role is what a replica's pool does.
type Role uint8

// Pool roles. Prefill and Decode arrive with disaggregated serving, Encode
// with disaggregated multimodal encoding (E/P/D).
const (
	Monolithic Role = iota
	Prefill
	Decode
	Encode
)

var roleNames = [...]string{"monolithic", "prefill", "decode", "encode"}

func (r Role) String() string { return roleNames[r] }

// ParseRole reads a pool role name.
func ParseRole(s string) (Role, bool) {
	for i, n := range roleNames {
		if n == s {
			return Role(i), true
		}
	}
	return 0, false
}

// Replica is one engine instance.
type Replica struct {
	ID         string // stable: "<deployment>/<n>"
	Index      int32  // cluster-wide index (instance_id in results)
	Deployment int32  // index of its deployment in the cluster
	Role       Role
	State      State

	Model latency.Model // while warming up (autoscaling), a model slowed by the warm-up curve
	Sched sched.Scheduler

	// InFlight counts requests routed here still in the alpha delay.
	InFlight int
	// WantSteps asks End to describe each step (for the steps table).
	WantSteps bool
	// ImageEncodeUS is the per-image vision encoder time (latency.image_encode_us).
	ImageEncodeUS float64
	// Ramps prices spans of decode-only steps (leap.go); nil: every step
	// is taken one at a time.
	Ramps *Ramps

	holds        Hold // reasons to step one at a time (HoldLeap)
	busy         bool
	startPending bool
	stepStart    int64
	batch        latency.Batch
	cancels      []*request.State

	Steps  int64 // steps run
	BusyUS int64 // time spent in steps

	tierOff, tierLoad int64 // lower-tier counters at the last step row

	span span // a span of steps in progress (leap.go)
}

// New returns a serving replica.
func New(id string, index, deployment int32, role Role, model latency.Model, s sched.Scheduler) *Replica {
	return &Replica{ID: id, Index: index, Deployment: deployment, Role: role, State: Serving, Model: model, Sched: s}
}

// Busy reports whether a step is executing.
func (p *Replica) Busy() bool { return p.busy }

// CanStart reports whether the replica is idle, has no start queued, and
// has work: the cluster should start (or queue) a step.
func (p *Replica) CanStart() bool {
	return !p.busy && !p.startPending && p.Sched.HasWork()
}

// StepStart is when the executing (or last) step started.
func (p *Replica) StepStart() int64 { return p.stepStart }

// StartPending reports whether a step-start event is queued.
func (p *Replica) StartPending() bool { return p.startPending }

// StartQueued records that a step-start event is queued for this instant.
func (p *Replica) StartQueued() { p.startPending = true }

// Start forms a step at now; ok is false when there is nothing to run.
// The cluster schedules End at end, after a last step of last µs: the
// step's own end, or with mayLeap, when the step begins a span
// (leap.go), the end of the span's last priced step.
func (p *Replica) Start(now int64, mayLeap bool) (end, last int64, ok bool) {
	p.startPending = false
	if p.busy {
		return 0, 0, false
	}
	if !p.Sched.Form(now, &p.batch) {
		return 0, 0, false
	}
	if mayLeap && p.batch.PrefillSeqs == 0 && p.Leapable() {
		if end, last, ok := p.leap(now); ok {
			p.busy = true
			p.stepStart = now
			return end, last, true
		}
	}
	dur := p.Model.StepTime(&p.batch)
	if p.batch.PrefillImages > 0 {
		dur += latency.ImageEncodeUS(p.ImageEncodeUS, p.batch.PrefillImages)
	}
	if dur < 1 {
		dur = 1
	}
	p.busy = true
	p.stepStart = now
	return now + dur, dur, true
}

// Effects is what ending a step did, for the cluster to apply.
type Effects struct {
	// Done lists requests that reached a final state, in order.
	Done []*request.State
	// Step is the step's row (for the steps table).
	Step row.Step
}

// End completes the executing step at now.
func (p *Replica) End(now int64, fx *Effects) {
	fx.Done = fx.Done[:0]
	if len(p.cancels) > 0 {
		for _, r := range p.cancels {
			if r.Cancel {
				p.Sched.Cancel(r)
				fx.Done = append(fx.Done, r)
			}
		}
		clear(p.cancels)
		p.cancels = p.cancels[:0]
	}
	step := p.Sched.StepIndex()
	p.Sched.Complete(now, &fx.Done)
	p.Steps++
	p.BusyUS += now - p.stepStart
	if p.WantSteps {
		l := p.Sched.Load()
		fx.Step = row.Step{InstanceID: p.Index, StepIndex: step, StartUS: p.stepStart, DurationUS: now - p.stepStart,
			BatchSize: int32(p.batch.Size()), PrefillTokens: int32(p.batch.PrefillTokens), DecodeTokens: int32(p.batch.DecodeSeqs),
			KVBlocksUsed: l.KVUsed, KVBlocksTotal: l.KVTotal, Waiting: int32(l.Waiting), Running: int32(l.Running),
			Preempted: p.Sched.Preempted(), ReplicaID: p.ID, Role: roleNames[p.Role]}
		if ts := p.Sched.Tiers(); ts != nil {
			var off, load int64
			for _, t := range ts.T {
				off += t.Stats.Offloads
				load += t.Stats.Loads
			}
			fx.Step.KVOffloads, fx.Step.KVReloads = int32(off-p.tierOff), int32(load-p.tierLoad)
			p.tierOff, p.tierLoad = off, load
		}
	}
	p.busy = false
}

// Cancel takes r (waiting or running here) off the replica; while a step
// executes, a running request leaves when it ends (as vLLM processes aborts
// between steps), and is then returned among End's Done. It reports
// whether r left at once.
func (p *Replica) Cancel(r *request.State) bool {
	if r.Phase == request.Running && p.busy {
		r.Cancel = true
		p.cancels = append(p.cancels, r)
		return false
	}
	p.Sched.Cancel(r)
	return true
}

// Check verifies the replica's invariants (full adds the KV walk).
func (p *Replica) Check(full bool) error {
	if err := p.Sched.Check(full); err != nil {
		return fmt.Errorf("replica %s: %w", p.ID, err)
	}
	return nil
}

// Clone copies the replica onto cloned requests.
func (p *Replica) Clone(c *request.Clone, keys *request.Keyer) *Replica {
	return p.CloneOnto(c, keys, p.Sched.KV().Clone())
}

// CloneOnto is Clone with the copy of the replica's KV store given.
func (p *Replica) CloneOnto(c *request.Clone, keys *request.Keyer, store kv.Store) *Replica {
	d := *p
	d.Sched = p.Sched.Clone(c, store, keys)
	d.span.runs = append([]leapRun(nil), p.span.runs...)
	d.cancels = make([]*request.State, len(p.cancels))
	for i, r := range p.cancels {
		d.cancels[i] = c.Map(r)
	}
	return &d
}
