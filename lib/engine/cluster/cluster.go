// Package cluster is the simulator's core: deployments of replicas behind a
// router, driven by one event queue. It does no I/O and owns no goroutines:
// the caller hands it request rows (Inject), advances it (Step, RunUntil)
// and receives results through a Sink, like etcd's raft. When the next
// event is the arrival of the last root read, Step returns NeedInput so the
// caller can read that root's dependents first (streamed tables).
package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/blis-sim/blis/lib/engine/autoscale"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/roofline"
)

// Sink receives one result per request, in the order requests reach a final
// state. *trace.ResultWriter satisfies it.
type Sink interface{ Write(*row.Result) error }

// StepSink receives one row per engine step. *trace.StepWriter satisfies it.
type StepSink interface{ Write(*row.Step) error }

// Options are the run's side channels.
type Options struct {
	Steps           StepSink                      // per-step rows; may be nil
	CheckInvariants bool                          // assert invariants while running (slower)
	Progress        func(simUS int64, done int64) // called every few thousand events; may be nil
	// PrefixBlockSize is the tokens per prefix_hashes entry (the table's
	// blis.prefix_block_size); 0 means each deployment's block size.
	PrefixBlockSize int
	// MaxInFlight caps the client's llm requests in flight (the table's
	// blis.max_in_flight, blis-sim --max-in-flight); 0 = no cap.
	MaxInFlight int
	// Path names the input in error messages.
	Path string
	// Streamed says rows arrive in the sorted-table order (a dependency
	// not found is then "among earlier rows").
	Streamed bool
	// Policies are the run's decision makers (nil stages: the config's
	// router keys).
	Policies Policies
	// RouterIndexes forces (1) or forbids (-1) the router's indexes (the
	// global prefix index and the load tree); 0 lets the cluster choose by
	// group size. The answers are the same either way (a test checks it).
	RouterIndexes int
	// ScaleEvents collects the scale-events rows (ScaleEvents) even when
	// no pool is autoscaled: one start and one end row per pool.
	ScaleEvents bool
	// ScaleEventsTo, when set, receives the scale-events rows when the
	// run finishes (and makes the cluster collect them, as ScaleEvents).
	ScaleEventsTo func([]row.ScaleEvent)
	// Decisions, when set, hears every decision (decision traces).
	Decisions Decisions
	// NoLeap takes every step one at a time: no span of steps is run as
	// one event (docs/engine.md, "Leaping"). The results are the same;
	// it is there to check that, and to time the difference.
	NoLeap bool
	// PrefixUnique: no two requests share their first prefix hash (the
	// input's blis.prefix_unique promise), so a cache keeps records only
	// for a request's first block (kv.Handle.Unique, kv.Paged.SetPrivate).
	// A run finding two that do fails (ErrPrefixClash). P/D deployments'
	// caches do not use it.
	PrefixUnique bool
}

// Policies are a run's decision makers, as one value: the router's stages,
// each replica's scheduling seams, each autoscaled pool's policy, and the
// hooks stateful policies need. A nil stage is built from the cluster
// config's router keys (config.Router.Policies); nil hooks are off. A
// policy bundle makes one (lib/engine/bundle); library users may write
// their own in Go.
type Policies struct {
	Admission policy.Admission
	Priority  policy.Priority
	Routing   policy.Routing
	// Scheduling gives each replica (by cluster-wide index) its waiting
	// order and preemption victim policies (nil = vLLM's own).
	Scheduling func(replica int32) (sched.Order, sched.Victim)
	// Autoscale gives the autoscaling policy of a deployment's pool; nil,
	// or a nil answer, keeps the pool's configured policy.
	Autoscale func(deployment string, pool int) autoscale.Policy
	// Err is asked after each router decision and each step formed: a
	// policy that failed (a sandboxed policy's runtime error, say) stops
	// the run with its error.
	Err func() error
	// OnResult hears every result before the sink does (a policy's state
	// learns of finished requests).
	OnResult func(*row.Result)
	// Fork gives a clone of the cluster its own copies of the policies
	// above that keep state: Clone calls it once and installs the answer
	// (nil fields keep the cloned built-in or Cloner policy).
	Fork func() Policies
	// ReadsTiers says a policy may read the replicas' lower KV tiers
	// (a bundle's decision tree or Starlark): their offload and reload
	// rates are taken over windows that roll as the router's board is
	// refreshed, so replicas with lower tiers then take every step one at
	// a time (replica.HoldTierRates).
	ReadsTiers bool
}

// Deployment is one model on one kind of GPU: its replicas share an engine
// config, a latency model and a way of deriving prefix-cache keys.
type Deployment struct {
	ID       string
	Model    string // as configured
	Engine   config.Engine
	Latency  latency.Model
	Replicas []int32 // cluster-wide replica indices
	keys     *request.Keyer
	group    *group
	spec     bool      // speculative decoding: its replicas are stepped (replica.HoldSpeculative)
	pd       *pdState  // nil unless it has prefill and decode pools
	enc      *encState // nil unless it has an encode pool (encode.go)
	// tiers builds a replica's lower KV tiers over its store (nil: none);
	// the autoscaler calls it for the fresh store of a restarted replica.
	tiers func(kv.Store) *kv.Tiers
	// tierCol maps the deployment's tier i to the run's (Summary.TierNames).
	tierCol []int
	// pools are the deployment's pools, in config order: each one's
	// replicas, latency model and engine (its own with heterogeneous P/D,
	// else the deployment's).
	pools []dpool
	// lora is the scheduler's view of its adapters (nil: none).
	lora *sched.LoRA
	// hybrid is its sliding-window KV groups (nil: none).
	hybrid *sched.Hybrid
}

// dpool is one pool of a deployment.
type dpool struct {
	role        replica.Role
	first, n    int32 // its replicas: cluster-wide indices [first, first+n)
	model       latency.Model
	engine      config.Engine
	linkBytesUS float64 // its network bandwidth for KV and embedding transfers, bytes per µs (0: unused)
	cfg         *config.Pool
	// stepModel is the model its replicas step with (the host work
	// added), ramps its leaping prices (leap.go; nil with NoLeap).
	stepModel latency.Model
	ramps     *replica.Ramps
}

// poolOf returns the pool of replica m (one of the deployment's).
func (d *Deployment) poolOf(m int32) *dpool {
	for i := range d.pools {
		if p := &d.pools[i]; m >= p.first && m < p.first+p.n {
			return p
		}
	}
	return nil
}

// group is the set of deployments a request's model selects: routing
// chooses among their replicas, through the group's board.
type group struct {
	members []int32 // cluster-wide replica indices, in deployment order
	board   *policy.Board
	index   *prefixIndex // nil unless prefix-aware routing uses one
	deps    []*Deployment
	// With an autoscaled pool (scale.go): members are the routable
	// replicas, all every replica (the index's slot positions), slotOf and
	// posOfSlot map board positions to slots and back; held are requests
	// waiting at the router while no replica can serve.
	all       []int32
	slotOf    []int32
	posOfSlot []int32
	held      []heldReq
	hbuf      []int32
	// sel is the group's P/D deployment when its decider chooses per
	// request (selective disaggregation, pd.go); nil otherwise.
	sel *Deployment
	// enc is the group's deployment with an encode pool (encode.go), nil
	// when it has none.
	enc *Deployment
	// gate is the group's gateway queue (flow control; gateway.go), nil
	// until a request waits there.
	gate *gqueue
}

// Summary counts what happened. Injected = Completed + Dropped + Rejected +
// TimedOut + Unfinished + SourceFailed.
type Summary struct {
	Injected, Completed, Dropped, Rejected, TimedOut, Unfinished, SourceFailed int64

	SimEndUS     int64   // simulated time of the last event processed
	Events       int64   // events processed
	Steps        int64   // engine steps, all replicas
	Spans        int64   // runs of steps taken as one event (docs/engine.md, "Leaping")
	Preemptions  int64   // recompute preemptions
	Evictions    int64   // prefix-cache blocks evicted for reuse
	CachedTokens int64   // prompt tokens served from the prefix cache (completed requests)
	LoRALoads    int64   // LoRA adapters loaded into GPU slots, all replicas
	BusyUS       []int64 // per replica: time spent in steps
	// PeakHeld is the most requests held in memory at once (in flight, or
	// finished but still nameable by a later row): what memory grows with.
	PeakHeld int64
	// Autoscaling: requests that waited at the router for a replica
	// (HeldAtRouter, with HeldUS µs of waiting in all), requests re-routed
	// by a redirect drain, requests dropped by a drain (immediate, or at
	// its timeout), and GPU-hours per deployment (replicas not stopped ×
	// tp × time; with Options.ScaleEvents or an autoscaler, else nil).
	HeldAtRouter, HeldUS, Redirected, DrainDropped int64
	ScaleUps, ScaleDowns                           int64
	GPUHours                                       []float64
	// Deployments describes each deployment (id, model, replicas, latency
	// model, KV blocks per replica).
	Deployments []DeploymentSummary

	// Lower KV tiers, all replicas: the run's tier names (nil without
	// tiers), and per tier the blocks copied in and loaded to the GPU;
	// thrashing loads.
	TierNames               []string
	TierOffloads, TierLoads []int64
	ThrashLoads             int64
	// Disaggregated serving: KV transfers started, their bytes, and those
	// that waited for the decode replica's blocks.
	Transfers, TransferBytes, PDBackpressure int64
	// Encode pools (E/P/D): requests encoded, their embeddings' bytes, and
	// the µs from their sending to an encode replica to the embeddings'
	// arrival, summed.
	Encodes, EncodeBytes, EncodeUS int64
	// Gateway flow control: requests that waited in the gateway queue
	// (GatewayQueued, with GatewayWaitUS µs of waiting in all), rejected
	// by a full queue or band, shed to make room, and rejected at the TTL.
	GatewayQueued, GatewayWaitUS, GatewayFull, GatewayShed, GatewayExpired int64
	// Holds by the routing policy (policy.RouteDecision.Wait): requests
	// held at least once, hold decisions, and µs the held requests waited
	// from their first hold until routed (or lost).
	RouteHeld, RouteHolds, RouteHeldUS int64
}

// ServedNothing reports a run in which no request completed because every
// one it could simulate was dropped, rejected or timed out: a
// configuration that cannot serve the workload (the tools exit 2), not a
// result. A run cut short by its horizon (unfinished requests) is not one.
func (s *Summary) ServedNothing() bool {
	lost := s.Dropped + s.Rejected + s.TimedOut
	return s.Completed == 0 && lost > 0 && lost == s.Injected-s.SourceFailed
}

// DeploymentSummary describes one deployment of the run.
type DeploymentSummary struct {
	ID, Model, Latency string
	Replicas           int
	KVBlocks           int64
	BlockSize          int
}

// Status says what Step did.
type Status uint8

const (
	// Stepped: an event was processed.
	Stepped Status = iota
	// NeedInput: the next event is the arrival of the last root injected;
	// inject the rows up to the next root (or call InputDone), then Step.
	NeedInput
	// Idle: no event at or before the limit.
	Idle
)

// Cluster is the simulated cluster.
type Cluster struct {
	cfg     *config.Cluster
	sink    Sink
	opts    Options
	checks  bool
	horizon int64
	flat    bool // the flat config form: every request goes to its one deployment

	now  int64
	h    eventHeap
	reps []*replica.Replica
	deps []*Deployment
	grps []*group // one per model served, then the decode pools of P/D deployments
	// nmodel is the number of groups of models served (c.grps[:nmodel]).
	nmodel int
	// byModel caches the group of each request model name seen.
	byModel map[string]*group
	gpos    []int32 // replica index -> position in its group

	admission   policy.Admission
	priority    policy.Priority
	routing     policy.Routing
	routingName string   // for messages
	tierNames   []string // the run's lower KV tiers (Summary.TierNames)
	prefixOn    bool     // the routing policy reads cached blocks
	liveView    bool     // the router's view is refreshed before each decision (no snapshot interval, and a policy reads it)
	snapEvery   int64
	snapAt      int64
	kvDelay     int64 // µs the router hears KV events late (config kv_event_delay)
	dirty       []int32
	isDirty     []bool
	timeout     int64       // config client_timeout, µs
	client      *clientGate // the client's in-flight cap; nil without one (client.go)

	// decision in progress (for the view callbacks)
	cur    *request.State
	curG   *group
	pbFn   func() int
	oracle groupOracle
	// noArrivals: a fork's router takes no more requests (StopArrivals).
	noArrivals bool

	// input
	frontier int64 // arrival of the latest root read; rows hanging off earlier roots are all read
	awaiting *request.State
	stashed  event
	hasStash bool

	// encodes: some deployment has an encode pool (encode.go).
	encodes bool
	// Tiered KV and P/D (nil when no deployment uses them).
	wakeAt []int64 // per replica: wake-up queued for a KV load
	// hasLoRA: some deployment has LoRA adapters (lora.go); loraBuf is
	// scratch for reportLoRAs.
	hasLoRA bool
	loraBuf []string
	// tierStat is scratch for the lower tiers' statuses (reportTiers).
	tierStat []policy.TierStatus
	pd       *disagg  // P/D hand-offs (nil without P/D pools)
	rgroup   []*group // per replica: the group whose board shows it

	ids     idIndex
	retired retireHeap
	pool    []*request.State
	slab    []request.State // new States are carved from slabs (newState)
	slabN   int             // the last slab's size
	liveH   *request.State
	liveT   *request.State
	work    []*request.State
	fx      replica.Effects
	unread  request.State

	res     row.Result
	tierBuf []int32 // a chunk results' CachedTokensTier are carved from
	sum     Summary
	err     error

	sc *scaler  // autoscaling; nil without
	fc *gateway // gateway flow control; nil without, until a routing policy holds a request
	// holdFrom is where the request the gateway is dispatching waited
	// (a hold keeps its TTL and first hold); nil otherwise.
	holdFrom *gpos

	// Leaping (leap.go): the replicas in a span; the key of the event
	// being processed (c.now is its time); what CatchUp is asked about.
	leap              leapSet
	at                uint64
	syncInst          int32
	syncKey           uint64
	endedFn, formedFn func(int64) bool

	// aheadOn reads the next step ends' replicas ahead (ahead.go): a fleet
	// of aheadReplicas and more (aheadFleet) does while aheadGate, every
	// aheadPoll events, finds its working set large; aheadLvl is the
	// stage each replica's read-ahead has reached.
	aheadOn, aheadFleet bool
	aheadPoll           int32
	aheadLvl            []uint8
}

// New builds a cluster for cfg; models holds each resolved deployment's
// latency model (config.Cluster.Resolved order), then each pool's with
// hardware of its own (config.Cluster.OwnPools order), as engine.Prepare
// returns them; KV blocks must be set.
func New(cfg *config.Cluster, models []latency.Model, sink Sink, opts Options) (*Cluster, error) {
	dcfg := cfg.Resolved()
	own := cfg.OwnPools()
	if len(models) != len(dcfg)+len(own) {
		return nil, fmt.Errorf("%d latency models for %d deployments and %d pools with hardware of their own", len(models), len(dcfg), len(own))
	}
	poolModel := func(i, j int) latency.Model {
		for k, o := range own {
			if o.Dep == i && o.Pool == j {
				return models[len(dcfg)+k]
			}
		}
		return models[i]
	}
	c := &Cluster{cfg: cfg, sink: sink, opts: opts, checks: opts.CheckInvariants,
		ids: newIDIndex(), frontier: math.MinInt64, byModel: map[string]*group{},
		snapEvery: cfg.SnapshotInterval.US(), timeout: cfg.ClientTimeout.US(), client: newClientGate(opts.MaxInFlight), kvDelay: cfg.KVEventDelay.US()}
	c.flat = cfg.IsFlat()
	c.tierNames = cfg.TierNames()
	c.sum.TierNames = c.tierNames
	c.horizon = cfg.Horizon.US()
	if c.horizon <= 0 {
		c.horizon = math.MaxInt64
	}
	var err error
	if err = c.setPolicies(&opts.Policies); err != nil {
		return nil, err
	}
	if scaleOn(dcfg, &opts) {
		c.sc = &scaler{c: c, policy: opts.Policies.Autoscale}
	}
	if f := cfg.Router.FlowControl; f != nil {
		c.fc = newGateway(c, f)
	}
	for i, d := range dcfg {
		e := d.Engine
		if e.KVBlocks <= 0 {
			return nil, fmt.Errorf("%s is 0: set it, or compute it from GPU memory (engine.Prepare does)", cfg.DeploymentKey(i, "engine.kv_blocks"))
		}
		pb := int32(opts.PrefixBlockSize)
		if pb <= 0 {
			pb = int32(e.BlockSize)
		}
		dep := &Deployment{ID: d.ID, Model: d.Model, Engine: e, Latency: models[i],
			keys: &request.Keyer{Enabled: e.PrefixCaching, Unique: opts.PrefixUnique, PrefixBlock: pb, Block: int32(e.BlockSize)}}
		c.deps = append(c.deps, dep)
		if d.IsPD() {
			if dep.pd, err = newPD(cfg, i, &d); err != nil {
				return nil, err
			}
			dep.pd.route = policy.Clone(c.routing)
		}
		if d.KV != nil && d.KV.HasTiers() {
			di := i
			dep.tiers = func(st kv.Store) *kv.Tiers { ts, _ := newTiers(cfg, di, &dcfg[di], st); return ts }
			for _, t := range d.KV.Tiers {
				dep.tierCol = append(dep.tierCol, slices.Index(c.tierNames, t.Name))
			}
		}
		dep.lora = loraConfig(d.LoRA)
		dep.hybrid = hybridKV(&d)
		c.hasLoRA = c.hasLoRA || dep.lora != nil
		dep.spec = d.Speculative != nil
		n := 0
		for pi, p := range d.Pools {
			role, _ := replica.ParseRole(p.Role)
			first := int32(len(c.reps))
			e, m := d.Engine, poolModel(i, pi)
			if p.Engine != nil {
				e = *p.Engine
				if e.KVBlocks <= 0 {
					return nil, fmt.Errorf("%s is 0: set it, or compute it from GPU memory (engine.Prepare does)", cfg.DeploymentKey(i, fmt.Sprintf("pools[%d].engine.kv_blocks", pi)))
				}
			}
			// A config built in code, not validated, takes vllm serve's limits too.
			e.FillLimits(cmp.Or(p.GPU, d.GPU))
			if e.MaxNumSeqs < 1 || e.MaxNumBatchedTokens < 1 {
				return nil, fmt.Errorf("%s: batch limits unset (max_num_seqs %d, max_num_batched_tokens %d): config.Cluster.Validate fills them from the GPU", cfg.DeploymentKey(i, "engine"), e.MaxNumSeqs, e.MaxNumBatchedTokens)
			}
			alpha := m.Alpha()
			scfg := sched.Config{MaxNumBatchedTokens: int32(e.MaxNumBatchedTokens), MaxNumSeqs: e.MaxNumSeqs,
				LongPrefillThreshold: int32(e.LongPrefillThreshold), Alpha2: alpha.PerOutputToken, Checks: opts.CheckInvariants,
				Async: e.AsyncScheduling, Sends: dep.pd != nil && dep.pd.overlap, Spec: specConfig(d.Speculative), LoRA: dep.lora,
				Window: latency.WindowOf(m), Hybrid: dep.hybrid}
			// The step model with the engine's CPU work, added to the GPU step
			// or overlapped with it as the scheduler does (latency.WithHost).
			stepModel := latency.WithHost(m, e.AsyncScheduling)
			dep.pools = append(dep.pools, dpool{role: role, first: first, n: int32(poolSlots(&p)), model: m, engine: e,
				linkBytesUS: p.LinkGBs * 1e3, cfg: &d.Pools[pi], stepModel: stepModel})
			for k := 0; k < poolSlots(&p); k++ {
				idx := int32(len(c.reps))
				store := kv.NewPaged(int32(e.KVBlocks), int32(e.BlockSize))
				store.SetPrivate(opts.PrefixUnique && dep.pd == nil) // P/D moves a request's blocks between replicas
				var order sched.Order
				var victim sched.Victim
				if opts.Policies.Scheduling != nil {
					order, victim = opts.Policies.Scheduling(idx)
				}
				s := sched.NewVLLM(scfg, store, dep.keys, order, victim)
				ts, err := newTiers(cfg, i, &dcfg[i], store)
				if err != nil {
					return nil, err
				}
				if ts != nil {
					s.SetTiers(ts)
					if c.wakeAt == nil {
						c.wakeAt = []int64{}
					}
				}
				// The scheduler orders by priority only under scheduling_policy: priority.
				c.reps = append(c.reps, replica.New(fmt.Sprintf("%s/%d", d.ID, n), idx, int32(i), role, stepModel, s))
				dep.Replicas = append(dep.Replicas, idx)
				n++
			}
			if c.sc != nil {
				if role == replica.Encode && p.Autoscaler != nil {
					return nil, fmt.Errorf("%s: an encode pool cannot be autoscaled (not modelled)", cfg.DeploymentKey(i, fmt.Sprintf("pools[%d].autoscaler", pi)))
				}
				if err := c.sc.addPool(dep, i, &dcfg[i], pi, first, scfg); err != nil {
					return nil, err
				}
			}
		}
		if d.HasEncode() {
			if dep.enc, err = newEnc(cfg, i, &d, dep); err != nil {
				return nil, err
			}
			dep.enc.route = policy.Clone(c.routing)
		}
	}
	// Decision traces record what the router's view shows, so it is kept
	// live for them even when every stage is blind to it.
	// So is it for the gateway's saturation detector.
	c.liveView = c.snapEvery == 0 && (opts.Decisions != nil || c.fc != nil || !(policy.Blind(c.admission) && policy.Blind(c.priority) && policy.Blind(c.routing)))
	for _, rep := range c.reps {
		rep.WantSteps = opts.Steps != nil || opts.Decisions != nil && opts.Decisions.WantBatches()
		rep.ImageEncodeUS = c.deps[rep.Deployment].imageEncodeUS(rep, &dcfg[rep.Deployment])
	}
	if opts.Decisions != nil {
		c.hookPreemptions(true)
		if b, ok := opts.Decisions.(interface{ Bind(*Cluster) }); ok {
			b.Bind(c)
		}
	}
	c.h.ends.init(len(c.reps))
	if len(c.reps) >= aheadFrom {
		c.aheadFleet, c.aheadLvl = true, make([]uint8, len(c.reps))
	}
	c.initLeap()
	c.isDirty = make([]bool, len(c.reps))
	c.gpos = make([]int32, len(c.reps))
	c.rgroup = make([]*group, len(c.reps))
	if c.wakeAt != nil {
		c.wakeAt = make([]int64, len(c.reps))
		for i := range c.wakeAt {
			c.wakeAt[i] = row.Null
		}
	}
	for _, d := range c.deps {
		if d.pd != nil && c.pd == nil {
			c.pd = newDisagg(c)
		}
	}
	if err := c.buildGroups(dcfg); err != nil {
		return nil, err
	}
	for _, d := range c.deps {
		if d.enc != nil {
			d.enc.initEnc()
			c.encodes = true
		}
	}
	if c.sc != nil {
		c.sc.initScale()
	}
	c.pbFn = c.promptBlocks
	c.sum.Deployments = make([]DeploymentSummary, len(c.deps))
	for i, d := range c.deps {
		n := 0 // replicas at the start (an autoscaled pool keeps stopped ones)
		for _, m := range d.Replicas {
			if c.reps[m].State != replica.Stopped {
				n++
			}
		}
		c.sum.Deployments[i] = DeploymentSummary{ID: d.ID, Model: d.Model, Latency: d.Latency.Name(),
			Replicas: n, KVBlocks: d.Engine.KVBlocks, BlockSize: d.Engine.BlockSize}
	}
	if c.snapEvery > 0 {
		c.refreshAll()
		c.snapAt = c.snapEvery
	}
	return c, nil
}

// modelKey is how request and deployment model names are compared: the
// catalogue's canonical short name when known, else the lower-cased name.
func modelKey(name string) string { return roofline.ModelKey(name) }

// buildGroups makes one candidate group per distinct model served (a
// deployment's model and its aliases), and maps every name to its group.
func (c *Cluster) buildGroups(dcfg []config.Deployment) error {
	byKey := map[string]*group{}
	for i, d := range c.deps {
		k := modelKey(d.Model)
		g := byKey[k]
		if g == nil {
			g = &group{}
			byKey[k] = g
			c.grps = append(c.grps, g)
		}
		g.deps = append(g.deps, d)
		d.group = g
		if d.pd != nil {
			// Requests are routed to the prefill pool; the decode pool is
			// its own candidate group (pickDecode).
			d.pd.decode = &group{deps: []*Deployment{d}}
			if d.pd.selective {
				g.sel = d
			}
			for _, m := range d.Replicas {
				switch c.reps[m].Role {
				case replica.Decode:
					d.pd.decode.members = append(d.pd.decode.members, m)
				case replica.Encode:
				default:
					g.members = append(g.members, m)
				}
			}
		} else if d.enc == nil {
			g.members = append(g.members, d.Replicas...)
		} else {
			for _, m := range d.Replicas {
				if c.reps[m].Role != replica.Encode {
					g.members = append(g.members, m)
				}
			}
		}
		if d.enc != nil {
			// Requests with images are encoded first (encode.go); the
			// encode pool is its own candidate group.
			d.enc.group = &group{deps: []*Deployment{d}}
			g.enc = d
			for _, m := range d.Replicas {
				if c.reps[m].Role == replica.Encode {
					d.enc.group.members = append(d.enc.group.members, m)
				}
			}
		}
		for _, a := range dcfg[i].Aliases {
			if _, ok := byKey[modelKey(a)]; !ok {
				byKey[modelKey(a)] = g
			}
		}
	}
	for k, g := range byKey {
		c.byModel[k] = g
	}
	nmodel := len(c.grps)
	c.nmodel = nmodel
	for _, g := range c.grps[:nmodel] {
		for _, d := range g.deps {
			if d.pd != nil && len(g.deps) > 1 {
				return fmt.Errorf("deployments %s and %s serve the same model: a prefill/decode deployment must be the only one serving its model", g.deps[0].ID, g.deps[1].ID)
			}
			if d.enc != nil && len(g.deps) > 1 {
				return fmt.Errorf("deployments %s and %s serve the same model: a deployment with an encode pool must be the only one serving its model", g.deps[0].ID, g.deps[1].ID)
			}
			if d.pd != nil {
				c.grps = append(c.grps, d.pd.decode)
			}
			if d.enc != nil {
				c.grps = append(c.grps, d.enc.group)
			}
		}
	}
	for gi, g := range c.grps {
		ids, deps, roles := make([]string, len(g.members)), make([]string, len(g.members)), make([]string, len(g.members))
		for j, m := range g.members {
			r := c.reps[m]
			c.gpos[m] = int32(j)
			c.rgroup[m] = g
			ids[j], deps[j], roles[j] = r.ID, c.deps[r.Deployment].ID, r.Role.String()
		}
		g.board = policy.NewBoard(ids, deps, roles, c.opts.RouterIndexes)
		c.watchBoard(g)
		useIndex := c.prefixOn && len(g.members) > indexMinReplicas && sameBlockSize(g.deps) && gi < nmodel
		if c.opts.RouterIndexes > 0 && c.prefixOn && sameBlockSize(g.deps) && gi < nmodel {
			useIndex = true
		} else if c.opts.RouterIndexes < 0 {
			useIndex = false
		}
		if c.kvDelay > 0 && (c.prefixOn || c.opts.Decisions != nil) && sameBlockSize(g.deps) {
			// KV events heard late: the router's view of the caches is the
			// index they feed, whatever the group's size (probing the
			// caches would be live). Decision traces read it too (the
			// shadow KV), so it is kept for them even when routing is
			// blind to it.
			useIndex = true
		}
		if useIndex {
			g.index = newPrefixIndex(len(g.members))
			g.index.delay, g.index.clock = c.kvDelay, &c.now
			for j, m := range g.members {
				c.reps[m].Sched.KV().SetObserver(g.index.observer(int32(j)))
			}
		}
		for j := range g.members {
			c.report(g.board, j, g.members[j])
		}
		if c.sc.dynamic(g) {
			g.all = g.members
			c.sc.rebuildBoard(g)
		}
	}
	return nil
}

func sameBlockSize(ds []*Deployment) bool {
	for _, d := range ds {
		if d.Engine.BlockSize != ds[0].Engine.BlockSize {
			return false
		}
	}
	return true
}

// indexMinReplicas is the group size above which prefix-aware routing uses
// the global prefix index instead of probing each replica's cache: probing
// costs O(replicas × prompt blocks) per decision, the index O(holders of
// the prompt's blocks) plus a map update per cached or evicted block.
const indexMinReplicas = 16

// Now is the simulated time of the last event processed.
func (c *Cluster) Now() int64 { return c.now }

// Replicas returns the replicas, by cluster-wide index.
func (c *Cluster) Replicas() []*replica.Replica { return c.reps }

// Deployments returns the deployments, in config order.
func (c *Cluster) Deployments() []*Deployment { return c.deps }

// Summary returns the counts so far.
func (c *Cluster) Summary() Summary { return c.sum }

// Err is the first error the run met (an invariant, a sink failure).
func (c *Cluster) Err() error { return c.err }

func (c *Cluster) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *Cluster) rowErr(r *row.Request, n int64, format string, args ...any) error {
	return &row.RowError{Path: c.opts.Path, Row: n, RequestID: r.ID, SourceRow: r.SourceRow, Err: fmt.Errorf(format, args...)}
}

// Step processes the next event if it is at or before until (and not after
// the horizon).
func (c *Cluster) Step(until int64) Status {
	if c.err != nil {
		return Idle
	}
	if c.hasStash {
		c.hasStash = false
		c.at = c.stashed.key
		c.process(&c.stashed)
		return Stepped
	}
	t, _, ok := c.h.next()
	if !ok || t > until || t > c.horizon {
		return Idle
	}
	ev := c.h.pop()
	if c.aheadOn && ev.kind() == evStepEnd {
		c.aheadLvl[ev.inst()] = 0 // its chain is read now: the next one is another
	}
	if c.checks && ev.t < c.now {
		c.fail(fmt.Errorf("invariant violated: clock went back from %d to %d", c.now, ev.t))
		return Idle
	}
	if c.snapEvery > 0 && (ev.t > c.snapAt || (ev.t == c.snapAt && ev.kind() >= evSnapshot)) {
		c.snapshotBefore(&ev)
	}
	c.now = ev.t
	c.at = ev.key
	c.sum.Events++
	if ev.kind() == evArrival && ev.r == c.awaiting && ev.r != nil {
		// Read this root's dependents before routing it: the router and
		// the prefix cache look at them (request.Keyer).
		c.awaiting = nil
		c.stashed, c.hasStash = ev, true
		return NeedInput
	}
	c.process(&ev)
	if c.aheadFleet {
		if c.aheadPoll--; c.aheadPoll <= 0 {
			c.aheadGate()
		}
		if c.aheadOn {
			c.ahead()
		}
	}
	return Stepped
}

// RunUntil processes events up to time t (inclusive); it stops early with
// NeedInput, or returns Idle when nothing is left at or before t.
func (c *Cluster) RunUntil(t int64) Status {
	for {
		switch st := c.Step(t); st {
		case Stepped:
			continue
		case Idle:
			c.settle(min(t, c.horizon))
			return st
		default:
			return st
		}
	}
}

func (c *Cluster) process(ev *event) {
	if r := ev.r; r != nil && (r.Life != ev.life() || r.Phase == request.Done) {
		return // the request was cancelled (timed out) since
	}
	switch ev.kind() {
	case evArrival:
		if c.noArrivals {
			return // a counterfactual fork: nothing more reaches the router (StopArrivals)
		}
		c.arrive(ev.r)
	case evEnqueue:
		c.enqueue(ev.r)
	case evStepStart:
		c.start(c.reps[ev.inst()])
	case evStepEnd:
		c.end(c.reps[ev.inst()])
	case evXferDone:
		c.pd.event(ev)
	case evWake:
		c.wake(c.reps[ev.inst()])
	case evToolDone:
		r := ev.r
		r.Finished = c.now
		r.Status = row.StatusCompleted
		c.terminal(r)
	case evTimeout:
		c.expire(ev.r)
	default: // evLifecycle, evScale: autoscaling (scale.go); evGateTTL, evGateWake: flow control (gateway.go); evHoldWake: holds (hold.go); a default keeps the common cases' dispatch as it was
		switch ev.kind() {
		case evGateTTL:
			c.fc.expire(ev.r)
		case evHoldWake:
			c.fc.wake(ev.r)
		case evGateWake:
			// nothing: the dispatch below looks at the snapshot just taken
		case evEncodeDone:
			c.encodeDone(ev.inst())
		default:
			c.sc.scaleEvent(ev)
		}
	}
	if c.fc != nil && c.fc.queued > 0 {
		c.fc.dispatch() // the event may have unsaturated a pool (gateway.go)
	}

	if c.opts.Progress != nil && c.sum.Events&0x3fff == 0 {
		done := c.sum.Completed + c.sum.Dropped + c.sum.Rejected + c.sum.TimedOut + c.sum.SourceFailed
		c.opts.Progress(c.now, done)
	}
}

// start forms and launches a step on rep at now.
func (c *Cluster) start(rep *replica.Replica) {
	mayLeap := rep.Leapable() && (c.pd == nil || len(c.pd.incoming[rep.Index]) == 0)
	end, last, ok := rep.Start(c.now, mayLeap)
	c.markDirty(rep.Index)
	if c.pd != nil && rep.Role == replica.Prefill {
		c.pd.takeSends(rep) // admissions reserve decode blocks, preemptions give them back
	}
	if c.opts.Policies.Err != nil && c.policyFailed() {
		return
	}
	if !ok {
		if rep.Sched.Preempted() > 0 && rep.CanStart() {
			// Forming preempted the only running requests and so admitted
			// nothing (vLLM admits nothing in a step that preempted); the
			// engine schedules again at once. Only reachable when blocks
			// are held outside the running set (P/D reservations).
			rep.StartQueued()
			c.h.push(c.now, evStepStart, rep.Index, nil)
			return
		}
		if c.wakeAt != nil {
			c.armWake(rep)
		}
		return
	}
	c.h.pushStepEnd(end, last, rep.Index)
	if rep.Leaping() {
		c.leap.add(rep.Index)
		c.sum.Spans++
	}
	if c.checks {
		if rep.State != replica.Serving && rep.State != replica.Warming && rep.State != replica.Draining {
			c.fail(fmt.Errorf("invariant violated: replica %s started a step while %s", rep.ID, rep.State))
		}
		if err := rep.Check(rep.Steps%1024 == 0); err != nil {
			c.fail(fmt.Errorf("invariant violated: %w", err))
		}
	}
}

// end applies the end of rep's step at now.
func (c *Cluster) end(rep *replica.Replica) {
	if rep.Leaping() {
		if rep.Continues() {
			// Nothing ends: the span is priced further (leap.go).
			end, last := rep.Extend()
			c.h.pushStepEnd(end, last, rep.Index)
			return
		}
		rep.EndLeap()
		c.leap.remove(rep.Index)
	}
	dur := c.now - rep.StepStart()
	rep.End(c.now, &c.fx)
	if c.opts.Steps != nil {
		if err := c.opts.Steps.Write(&c.fx.Step); err != nil {
			c.fail(err)
		}
	}
	if c.opts.Decisions != nil && rep.WantSteps {
		c.opts.Decisions.Batch(&c.fx.Step)
	}
	if c.pd != nil && rep.Role == replica.Prefill {
		c.pd.takeSends(rep) // the chunks' KV goes on the link before a hand-off sends the rest
	}
	// A finished request's ID was read seconds ago: its bytes (copied into
	// its result row) and its slot in the ID index (cleared when it is
	// retired) are cold. Ask for both at once, so their misses overlap
	// each other and the work before their use.
	for _, r := range c.fx.Done {
		if len(r.Req.ID) > 0 {
			prefetch(unsafe.Pointer(unsafe.StringData(r.Req.ID)))
		}
		c.ids.warm(r)
	}
	for _, r := range c.fx.Done {
		if r.Cancel {
			c.timedOut(r)
			continue
		}
		if r.Phase == request.Transfer {
			c.pd.handoff(r, rep)
			continue
		}
		c.terminal(r)
	}
	c.markDirty(rep.Index)
	if c.pd != nil && rep.Role == replica.Decode {
		c.pd.admitIncoming(rep)
	}
	c.kickAfter(rep, dur)
	if c.wakeAt != nil {
		c.armWake(rep)
	}
}

// kick starts a step on an idle replica that has work: at once when no
// other event shares this instant, else after every same-time event (so
// that same-time arrivals join the step).
//
// A step starts at once only when it cannot matter to anything else of
// the instant: not when a periodic router snapshot falls due at it (the
// snapshot shows the replica before the step, as it shows a replica whose
// start is queued).
func (c *Cluster) kick(rep *replica.Replica) { c.kickAfter(rep, -1) }

// kickAfter is kick at the end of rep's own step of dur µs (dur < 0: from
// anything else): such starts, when queued, run in the order of their step
// ends, before the other starts of the instant (events.go).
func (c *Cluster) kickAfter(rep *replica.Replica, dur int64) {
	if !rep.CanStart() {
		if rep.State == replica.Draining {
			c.sc.drainedCheck(rep) // idle: it may have finished its drain (scale.go)
		}
		return
	}
	if t, _, ok := c.h.next(); (!ok || t > c.now) && (c.snapEvery == 0 || c.snapAt != c.now) &&
		(c.fc == nil || c.fc.queued == 0 || !c.leapEventNow()) {
		c.start(rep)
		return
	}
	rep.StartQueued()
	if dur >= 0 {
		c.h.pushChainStart(c.now, dur, rep.Index)
		return
	}
	c.h.push(c.now, evStepStart, rep.Index, nil)
}

func (c *Cluster) enqueue(r *request.State) {
	rep := c.reps[r.Replica]
	if rep.Leaping() {
		if c.deps[rep.Deployment].Engine.AsyncScheduling {
			c.shorten(rep, 1) // seen by the next step but one (sched.VLLM.Form)
		} else {
			c.cut(rep)
		}
	}
	rep.InFlight--
	r.Enqueued = c.now
	rep.Sched.Enqueue(r)
	c.markDirty(rep.Index)
	c.kick(rep)
}

// status is what the router learns about replica i.
func (c *Cluster) status(i int32) policy.ReplicaStatus {
	rep := c.reps[i]
	l := rep.Sched.Load()
	return policy.ReplicaStatus{Waiting: l.Waiting, Running: l.Running, InFlight: rep.InFlight,
		KVUsed: int64(l.KVUsed), KVTotal: int64(l.KVTotal)}
}

// report puts replica i's status on board b at position j (and, with
// lower KV tiers, theirs: tierwake.go).
// A replica in a span is first brought up to the event being processed;
// as its steps go on it uses KV blocks unseen, so a policy reading its
// status from KVChangeAt on gets it afresh (readBoard).
func (c *Cluster) report(b *policy.Board, j int, i int32) {
	rep := c.reps[i]
	c.sync(rep)
	b.Set(j, c.status(i))
	if c.wakeAt != nil {
		c.reportTiers(b, j, i)
	}
	if c.hasLoRA {
		c.reportLoRAs(b, j, i)
	}
	if c.liveView {
		b.SetVolatile(j, rep.KVChangeAt())
	}
}

// policyFailed stops the run if a policy failed.
func (c *Cluster) policyFailed() bool {
	if err := c.opts.Policies.Err(); err != nil {
		c.fail(err)
		return true
	}
	return false
}

// markDirty notes that replica i's status changed; with a live router view
// it is refreshed before the next decision.
func (c *Cluster) markDirty(i int32) {
	if !c.liveView || c.isDirty[i] {
		return
	}
	c.isDirty[i] = true
	c.dirty = append(c.dirty, i)
}

func (c *Cluster) refreshDirty() {
	for _, i := range c.dirty {
		c.isDirty[i] = false
		if p := c.gpos[i]; p >= 0 { // -1: not routable (autoscaling)
			c.report(c.rgroup[i].board, int(p), i)
		}
	}
	c.dirty = c.dirty[:0]
}

// readBoard refreshes position p of g's board as a policy reads it: a
// replica in a span, brought up to the event being processed.
func (c *Cluster) readBoard(g *group, p int) {
	c.report(g.board, p, g.members[p])
}

func (c *Cluster) refreshAll() {
	for _, g := range c.grps {
		for j, m := range g.members {
			c.report(g.board, j, m)
		}
	}
}

// snapshotBefore takes the router's periodic snapshot due before ev. The
// cluster's state is constant between events, so the state just before ev
// is the state at every snapshot time since the previous event: one refresh
// stands for all of them, and idle stretches cost nothing.
//
// A replica in a span has gone on stepping since: it is brought to the
// snapshot's instant, after that instant's step ends and timers and before
// its step starts (a kick queues a start when a snapshot falls due).
func (c *Cluster) snapshotBefore(ev *event) {
	m := ev.t - ev.t%c.snapEvery // last snapshot time <= ev.t
	if len(c.leap.ids) > 0 {
		at := m
		if m == ev.t && ev.kind() < evSnapshot {
			at = m - c.snapEvery
		}
		c.syncAll(at, uint64(evSnapshot)<<56)
	}
	c.refreshAll()
	next := m + c.snapEvery
	if m == ev.t && ev.kind() < evSnapshot {
		next = m // due after the step ends and timers of this instant
	}
	c.snapAt = max(next, c.snapAt+c.snapEvery)
}

// errStall is returned by Finish when requests are left with no event.
var errStall = errors.New("internal error: requests stalled with no event left")

// hybridKV is the sliding-window KV groups of d's replicas under vLLM's
// hybrid KV cache manager (config.Deployment.HybridKV); nil: none.
func hybridKV(d *config.Deployment) *sched.Hybrid {
	g, ok := d.HybridKV()
	if !ok {
		return nil
	}
	return &sched.Hybrid{Window: int32(g.Window), Groups: int32(g.Slide)}
}
