package cluster

import (
	"math"

	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Clone returns an independent copy of the cluster at this instant, writing
// its results to sink and its steps to steps (either may be nil to discard
// them). Running both on from here gives the same results as running the
// original alone: counterfactual replays fork a cluster at a decision and
// run the fork with another choice. Policies that keep state are copied
// (policy.Cloner); the caller's Progress callback is not carried over.
// Cloning stamps the original's requests (request.Clone): two goroutines
// must not clone one cluster at once.
func (c *Cluster) Clone(sink Sink, steps StepSink) *Cluster {
	return c.cloneWith(request.NewCloneN(c.ids.len()+64), sink, steps, nil)
}

// cloneWith clones through m (reset by the caller for a whole clone). A
// fork (Fork: no more input, never finished; a not nil) leaves out what
// only input and the end of the run need: the id index and the finished
// requests kept for later rows to name; and copies the KV stores into the
// arena's dead ones.
func (c *Cluster) cloneWith(m *request.Clone, sink Sink, steps StepSink, a *ForkArena) *Cluster {
	fork := a != nil
	d := *c
	if sink == nil {
		sink = discard{}
	}
	d.sink = sink
	d.opts.Steps = steps
	d.opts.Progress = nil
	d.opts.Decisions = nil // forks are not traced
	d.loraBuf = nil        // scratch
	d.holdFrom = nil       // a fork taken in a dispatch's routing decision places that request itself

	d.h = c.h.clone(m)
	d.stashed.r = m.Map(c.stashed.r)
	d.client = c.client.clone(m)
	d.awaiting = m.Map(c.awaiting)
	d.deps = make([]*Deployment, len(c.deps))
	depMap := map[*Deployment]*Deployment{}
	for i, dep := range c.deps {
		x := *dep
		x.keys = &request.Keyer{Enabled: dep.keys.Enabled, PrefixBlock: dep.keys.PrefixBlock, Block: dep.keys.Block}
		if dep.pd != nil {
			p := *dep.pd
			p.route = policy.Clone(dep.pd.route)
			x.pd = &p
		}
		if dep.enc != nil {
			x.enc = dep.enc.clone(m)
		}
		d.deps[i] = &x
		depMap[dep] = &x
	}
	d.reps = make([]*replica.Replica, len(c.reps))
	for i, r := range c.reps {
		if pg, ok := r.Sched.KV().(*kv.Paged); ok && fork {
			if len(a.kvs) != len(c.reps) {
				a.kvs = make([]kv.Store, len(c.reps))
			}
			a.kvs[i] = pg.CloneInto(a.kvs[i])
			d.reps[i] = r.CloneOnto(m, d.deps[r.Deployment].keys, a.kvs[i])
			continue
		}
		d.reps[i] = r.Clone(m, d.deps[r.Deployment].keys)
	}
	d.grps = make([]*group, len(c.grps))
	grpMap := map[*group]*group{}
	for i, g := range c.grps {
		x := &group{members: g.members, board: g.board.Clone(), all: g.all, slotOf: g.slotOf,
			posOfSlot: append([]int32(nil), g.posOfSlot...)}
		d.watchBoard(x)
		for _, h := range g.held {
			x.held = append(x.held, heldReq{m.Map(h.r), h.life})
		}
		for _, dep := range g.deps {
			x.deps = append(x.deps, depMap[dep])
		}
		if g.sel != nil {
			x.sel = depMap[g.sel]
		}
		if g.enc != nil {
			x.enc = depMap[g.enc]
		}
		if g.index != nil {
			x.index = g.index.clone(&d.now)
			slots := g.members
			if g.all != nil {
				slots = g.all
			}
			for j, mm := range slots {
				d.reps[mm].Sched.KV().SetObserver(x.index.observer(int32(j)))
			}
		}
		d.grps[i] = x
		grpMap[g] = x
	}
	for _, dep := range d.deps {
		dep.group = grpMap[dep.group]
		if dep.pd != nil {
			dep.pd.decode = grpMap[dep.pd.decode]
		}
		if dep.enc != nil {
			dep.enc.group = grpMap[dep.enc.group]
		}
	}
	d.rgroup = make([]*group, len(c.rgroup))
	for i, g := range c.rgroup {
		d.rgroup[i] = grpMap[g]
	}
	if c.wakeAt != nil {
		d.wakeAt = append([]int64(nil), c.wakeAt...)
	}
	if c.pd != nil {
		d.pd = c.pd.clone(&d, m)
	}
	d.byModel = make(map[string]*group, len(c.byModel))
	for k, g := range c.byModel {
		d.byModel[k] = grpMap[g]
	}
	if c.fc != nil {
		d.fc = c.fc.clone(m, &d, grpMap)
	}
	if c.sc != nil {
		d.sc = c.sc.clone(m, &d, depMap, grpMap)
		d.gpos = append([]int32(nil), c.gpos...)
	}
	d.admission = policy.Clone(c.admission)
	d.priority = policy.Clone(c.priority)
	d.routing = policy.Clone(c.routing)
	if c.opts.Policies.Fork != nil {
		d.fork(c.opts.Policies.Fork())
	}
	d.dirty = append([]int32(nil), c.dirty...)
	d.isDirty = append([]bool(nil), c.isDirty...)
	if c.aheadFleet {
		d.aheadLvl = make([]uint8, len(c.aheadLvl)) // hints only: none yet
	}
	d.pbFn = d.promptBlocks
	if c.leap.pos != nil {
		d.leap = leapSet{ids: append([]int32(nil), c.leap.ids...), pos: append([]int32(nil), c.leap.pos...)}
		d.bindLeap()
	}
	d.oracle = groupOracle{}
	d.cur, d.curG = nil, nil

	if fork {
		d.ids, d.retired.S = idIndex{seed: c.ids.seed}, nil
		d.frontier = math.MinInt64 // nothing to forget
	} else {
		d.ids = c.ids.clone(m.Map)
		d.retired.S = make([]retireEntry, len(c.retired.S))
		for i, e := range c.retired.S {
			d.retired.S[i] = retireEntry{m.Map(e.r)}
		}
	}
	// Free states are not copied: the fork allocates its own (a state's
	// identity never shows in results), and forks stay cheap.
	d.pool, d.slab, d.slabN = nil, nil, 0
	d.tierBuf = nil // the original keeps carving its chunk
	d.liveH, d.liveT = m.Map(c.liveH), m.Map(c.liveT)
	d.work = nil
	d.fx = replica.Effects{}
	d.sum.BusyUS = append([]int64(nil), c.sum.BusyUS...)
	d.sum.Deployments = append([]DeploymentSummary(nil), c.sum.Deployments...)
	m.Finish()
	if c.opts.Decisions != nil {
		d.hookPreemptions(false)
		for _, rep := range d.reps {
			rep.WantSteps = d.opts.Steps != nil
		}
	}
	return &d
}

type discard struct{}

func (discard) Write(*row.Result) error { return nil }
