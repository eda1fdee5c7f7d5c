package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// InstanceView is what the router knows about one replica: a snapshot
// refreshed every snapshot_interval (live when 0), plus the requests the
// router itself has sent there since (InFlight).
type InstanceView struct {
	Waiting  int   // in the waiting queue
	Running  int   // in the running batch
	InFlight int   // routed but not yet in the queue (alpha delay, or since the snapshot)
	KVUsed   int64 // KV blocks referenced or holding no reusable prefix
	KVTotal  int64
}

// Load is the queue + running + in-flight count least-loaded routing uses.
func (v *InstanceView) Load() int { return v.Waiting + v.Running + v.InFlight }

// ClusterView is the router's view of the cluster for one decision.
type ClusterView struct {
	Now       int64
	Instances []InstanceView
	s         *sim
	r         *reqState
}

// CachedBlocks is the number of leading prompt blocks of the request being
// routed that instance i holds in its prefix cache (a live view, as a
// KV-event-fed prefix index gives a real router).
func (c *ClusterView) CachedBlocks(i int) int {
	c.s.ensureKeys(c.r)
	return c.s.inst[i].kv.lookup(c.r.keys, len(c.r.keys))
}

// PromptBlocks is the number of prompt blocks with a cache key.
func (c *ClusterView) PromptBlocks() int {
	c.s.ensureKeys(c.r)
	return len(c.r.keys)
}

// Admission decides whether a request enters the cluster; reason says why
// not.
type Admission interface {
	Admit(req *trace.Request, c *ClusterView) (ok bool, reason string)
}

// Priority gives a request's priority in the instance waiting queues (larger
// runs first) when engine.scheduling_policy is priority.
type Priority interface {
	Priority(req *trace.Request) int64
}

// Routing picks the instance for an admitted request.
type Routing interface {
	Route(req *trace.Request, c *ClusterView) int
}

type admitAll struct{}

func (admitAll) Admit(*trace.Request, *ClusterView) (bool, string) { return true, "" }

type queueLimit struct{ limit int }

func (q queueLimit) Admit(_ *trace.Request, c *ClusterView) (bool, string) {
	n := 0
	for i := range c.Instances {
		n += c.Instances[i].Waiting + c.Instances[i].InFlight
	}
	if n >= q.limit {
		return false, fmt.Sprintf("queue-limit: %d requests queued cluster-wide (limit %d)", n, q.limit)
	}
	return true, ""
}

func newAdmission(rc RouterConfig) (Admission, error) {
	switch rc.Admission {
	case "always", "":
		return admitAll{}, nil
	case "queue-limit":
		if rc.QueueLimit < 1 {
			return nil, fmt.Errorf("router.queue_limit: expected >= 1 for queue-limit admission, found %d", rc.QueueLimit)
		}
		return queueLimit{rc.QueueLimit}, nil
	}
	return nil, fmt.Errorf("router.admission: expected always or queue-limit, found %q", rc.Admission)
}

type fcfsPriority struct{}

func (fcfsPriority) Priority(*trace.Request) int64 { return 0 }

type requestPriority struct{}

func (requestPriority) Priority(r *trace.Request) int64 { return int64(r.Priority) }

func newPriority(name string) (Priority, error) {
	switch name {
	case "fcfs", "":
		return fcfsPriority{}, nil
	case "request":
		return requestPriority{}, nil
	}
	return nil, fmt.Errorf("router.priority: expected fcfs or request, found %q", name)
}

// RoutingNames lists the built-in routing policies.
var RoutingNames = []string{"round-robin", "least-loaded", "least-kv", "prefix-affinity", "weighted"}

type roundRobin struct{ next int }

func (p *roundRobin) Route(_ *trace.Request, c *ClusterView) int {
	i := p.next % len(c.Instances)
	p.next = i + 1
	return i
}

type leastLoaded struct{}

func (leastLoaded) Route(_ *trace.Request, c *ClusterView) int {
	best, bl := 0, c.Instances[0].Load()
	for i := 1; i < len(c.Instances); i++ {
		if l := c.Instances[i].Load(); l < bl {
			best, bl = i, l
		}
	}
	return best
}

type leastKV struct{}

func (leastKV) Route(_ *trace.Request, c *ClusterView) int {
	best := 0
	for i := 1; i < len(c.Instances); i++ {
		a, b := &c.Instances[i], &c.Instances[best]
		// Compare used fractions exactly: a.used/a.total < b.used/b.total.
		x, y := a.KVUsed*b.KVTotal, b.KVUsed*a.KVTotal
		if x < y || (x == y && a.Load() < b.Load()) {
			best = i
		}
	}
	return best
}

type prefixAffinity struct{}

func (prefixAffinity) Route(_ *trace.Request, c *ClusterView) int {
	best, bh := 0, c.CachedBlocks(0)
	for i := 1; i < len(c.Instances); i++ {
		h := c.CachedBlocks(i)
		if h > bh || (h == bh && c.Instances[i].Load() < c.Instances[best].Load()) {
			best, bh = i, h
		}
	}
	return best
}

// weighted scores each instance by w_load·(1 − load/max load) +
// w_kv·(1 − KV used fraction) + w_prefix·(cached blocks / prompt blocks)
// and picks the highest (lowest index on ties).
type weighted struct{ load, kv, prefix float64 }

func (p weighted) Route(_ *trace.Request, c *ClusterView) int {
	maxLoad := 1
	for i := range c.Instances {
		if l := c.Instances[i].Load(); l > maxLoad {
			maxLoad = l
		}
	}
	pb := 0
	if p.prefix != 0 {
		pb = c.PromptBlocks()
	}
	best, bs := 0, 0.0
	for i := range c.Instances {
		v := &c.Instances[i]
		sc := p.load * (1 - float64(v.Load())/float64(maxLoad))
		if v.KVTotal > 0 {
			sc += p.kv * (1 - float64(v.KVUsed)/float64(v.KVTotal))
		}
		if pb > 0 {
			sc += p.prefix * float64(c.CachedBlocks(i)) / float64(pb)
		}
		if i == 0 || sc > bs {
			best, bs = i, sc
		}
	}
	return best
}

func newRouting(rc RouterConfig) (Routing, error) {
	if rc.Routing != "weighted" && len(rc.Weights) > 0 {
		return nil, fmt.Errorf("router.weights: only used by weighted routing, found routing %q", rc.Routing)
	}
	switch rc.Routing {
	case "round-robin", "":
		return &roundRobin{}, nil
	case "least-loaded":
		return leastLoaded{}, nil
	case "least-kv":
		return leastKV{}, nil
	case "prefix-affinity":
		return prefixAffinity{}, nil
	case "weighted":
		w := weighted{load: 1, kv: 1, prefix: 1}
		if len(rc.Weights) > 0 {
			w = weighted{}
			keys := make([]string, 0, len(rc.Weights))
			for k := range rc.Weights {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				v := rc.Weights[k]
				if v < 0 {
					return nil, fmt.Errorf("router.weights.%s: expected >= 0, found %g", k, v)
				}
				switch k {
				case "load":
					w.load = v
				case "kv":
					w.kv = v
				case "prefix":
					w.prefix = v
				default:
					return nil, fmt.Errorf("router.weights: unknown scorer %q (expected load, kv or prefix)", k)
				}
			}
			if w.load == 0 && w.kv == 0 && w.prefix == 0 {
				return nil, fmt.Errorf("router.weights: expected at least one weight > 0 (all zero sends everything to replica 0)")
			}
		}
		return w, nil
	}
	return nil, fmt.Errorf("router.routing: expected one of %s, found %q", strings.Join(RoutingNames, ", "), rc.Routing)
}
