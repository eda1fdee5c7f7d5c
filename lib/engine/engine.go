// Package engine is BLIS's discrete-event cluster simulator: N vLLM-v1-style
// replicas behind a router pipeline (admission → priority → routing), fed by
// a requests table and writing a results table as requests finish.
package engine

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// Source yields request rows in batches; io.EOF at the end.
// *trace.RequestReader satisfies it.
type Source interface {
	Next(buf []trace.Request) ([]trace.Request, error)
}

// Sink receives one result per request, in the order requests reach a final
// state. *trace.ResultWriter satisfies it.
type Sink interface{ Write(*trace.Result) error }

// StepSink receives one row per engine step. *trace.StepWriter satisfies it.
type StepSink interface{ Write(*trace.Step) error }

type sliceSource struct {
	reqs []trace.Request
	done bool
}

func (s *sliceSource) Next(buf []trace.Request) ([]trace.Request, error) {
	if s.done {
		return buf[:0], io.EOF
	}
	s.done = true
	return s.reqs, nil
}

// SliceSource serves requests held in memory, in any order: Run sorts them,
// checks the dependency graph as a whole (duplicates, dangling depends_on,
// cycles) and registers them all before simulating.
func SliceSource(reqs []trace.Request) Source { return &sliceSource{reqs: reqs} }

// Options are the run's side channels.
type Options struct {
	Steps           StepSink                      // per-step rows; may be nil
	CheckInvariants bool                          // assert invariants while running (slower)
	Progress        func(simUS int64, done int64) // called every few thousand events; may be nil
	// PrefixBlockSize is the tokens per prefix_hashes entry (the table's
	// blis.prefix_block_size); 0 means the engine block size.
	PrefixBlockSize int
	// Path names the input in error messages.
	Path string
	// Admission, Priority and Routing, when set, replace the router stages
	// the config names (for policies written in Go by library users).
	Admission Admission
	Priority  Priority
	Routing   Routing
}

// Summary counts what happened. Injected = Completed + Dropped + Rejected +
// Unfinished + SourceFailed.
type Summary struct {
	Injected, Completed, Dropped, Rejected, Unfinished, SourceFailed int64

	SimEndUS     int64   // simulated time of the last event processed
	Events       int64   // events processed
	Steps        int64   // engine steps, all instances
	Preemptions  int64   // recompute preemptions
	Evictions    int64   // prefix-cache blocks evicted for reuse
	CachedTokens int64   // prompt tokens served from the prefix cache (completed requests)
	BusyUS       []int64 // per instance: time spent in steps
	Model        string  // latency model name
	KVBlocks     int64   // KV blocks per instance
	// PeakHeld is the most requests held in memory at once (in flight, or
	// finished but still nameable by a later row): what memory grows with.
	PeakHeld int64
}

// Run simulates the cluster of cfg on the requests of src, writing results
// to sink. Errors in the input are *trace.RowError.
func Run(cfg Config, model latency.Model, src Source, sink Sink, opts Options) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	if cfg.Engine.KVBlocks <= 0 {
		return Summary{}, errors.New("engine.kv_blocks is 0: set it, or compute it from GPU memory (blis-sim does with --latency/--model/--gpu)")
	}
	s, err := newSim(cfg, model, sink, opts)
	if err != nil {
		return Summary{}, err
	}
	return s.run(src)
}

type sim struct {
	cfg    Config
	model  latency.Model
	alpha  latency.Alpha
	alpha2 float64
	sink   Sink
	opts   Options
	checks bool

	now  int64
	h    eventHeap
	inst []*instance

	admission Admission
	priority  Priority
	routing   Routing
	view      ClusterView
	snapEvery int64
	snapAt    int64

	prefixBlock int32
	preemptSeq  int64
	enqSeq      int64

	// input
	src      Source
	buf      []trace.Request
	bufPos   int
	rows     int64
	eof      bool
	lastRoot int64
	frontier int64 // arrival of the latest root read; rows hanging off earlier roots are all read
	preload  bool
	nextRoot *reqState // the root whose arrival triggers reading ahead

	ids     map[string]*reqState
	retired retireHeap
	pool    []*reqState
	liveH   *reqState
	liveT   *reqState
	work    []*reqState
	kids    []*reqState
	drainR  reqState
	scratch []uint64

	res     trace.Result
	stepRow trace.Step
	sum     Summary
	err     error
}

func newSim(cfg Config, model latency.Model, sink Sink, opts Options) (*sim, error) {
	s := &sim{cfg: cfg, model: model, alpha: model.Alpha(), sink: sink, opts: opts, checks: opts.CheckInvariants,
		ids: map[string]*reqState{}, lastRoot: math.MinInt64, frontier: math.MinInt64}
	s.alpha2 = s.alpha.PerOutputToken
	var err error
	if s.admission, err = newAdmission(cfg.Router); err != nil {
		return nil, err
	}
	if s.priority, err = newPriority(cfg.Router.Priority); err != nil {
		return nil, err
	}
	if cfg.Engine.SchedulingPolicy == "fcfs" {
		s.priority = fcfsPriority{}
	}
	if s.routing, err = newRouting(cfg.Router); err != nil {
		return nil, err
	}
	if opts.Admission != nil {
		s.admission = opts.Admission
	}
	if opts.Priority != nil && cfg.Engine.SchedulingPolicy == "priority" {
		s.priority = opts.Priority
	}
	if opts.Routing != nil {
		s.routing = opts.Routing
	}
	s.prefixBlock = int32(opts.PrefixBlockSize)
	if s.prefixBlock <= 0 {
		s.prefixBlock = int32(cfg.Engine.BlockSize)
	}
	for i := 0; i < cfg.Replicas; i++ {
		s.inst = append(s.inst, newInstance(int32(i), int32(cfg.Engine.KVBlocks), int32(cfg.Engine.BlockSize)))
	}
	s.view = ClusterView{Instances: make([]InstanceView, cfg.Replicas), s: s}
	s.snapEvery = cfg.SnapshotInterval.US()
	return s, nil
}

func (s *sim) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *sim) rowErr(r *trace.Request, row int64, format string, args ...any) error {
	return &trace.RowError{Path: s.opts.Path, Row: row, RequestID: r.ID, SourceRow: r.SourceRow, Err: fmt.Errorf(format, args...)}
}

func (s *sim) run(src Source) (Summary, error) {
	s.src = src
	if ss, ok := src.(*sliceSource); ok {
		if err := s.preloadAll(ss.reqs); err != nil {
			return s.sum, err
		}
	} else if err := s.readNextRoot(); err != nil {
		return s.sum, err
	}
	if s.snapEvery > 0 {
		s.refreshSnapshot()
		s.snapAt = s.snapEvery
	}
	horizon := s.cfg.Horizon.US()
	if horizon <= 0 {
		horizon = math.MaxInt64
	}
	var done int64
	for s.h.len() > 0 && s.err == nil {
		if s.h.top().t > horizon {
			break
		}
		ev := s.h.pop()
		if s.checks && ev.t < s.now {
			return s.sum, fmt.Errorf("invariant violated: clock went back from %d to %d", s.now, ev.t)
		}
		if s.snapEvery > 0 && (ev.t > s.snapAt || (ev.t == s.snapAt && ev.kind() >= evSnapshot)) {
			s.snapshotBefore(&ev)
		}
		s.now = ev.t
		s.sum.Events++
		switch ev.kind() {
		case evArrival:
			if ev.r == s.nextRoot {
				// Read this root's dependents before routing it: the
				// router and the prefix cache look at them (ensureKeys).
				s.nextRoot = nil
				if err := s.readNextRoot(); err != nil {
					return s.sum, err
				}
			}
			s.arrive(ev.r)
		case evEnqueue:
			s.enqueue(ev.r)
		case evStepStart:
			in := s.inst[ev.inst]
			in.startPending = false
			if !in.busy {
				s.startStep(in)
			}
		case evStepEnd:
			s.endStep(s.inst[ev.inst])
		case evToolDone:
			r := ev.r
			r.finished = s.now
			r.status = trace.StatusCompleted
			s.terminal(r)
		}
		if s.opts.Progress != nil && s.sum.Events&0x3fff == 0 {
			done = s.sum.Completed + s.sum.Dropped + s.sum.Rejected + s.sum.SourceFailed
			s.opts.Progress(s.now, done)
		}
	}
	if s.err != nil {
		return s.sum, s.err
	}
	s.sum.SimEndUS = s.now
	// Rows not read yet belong to sessions rooted after the horizon (the
	// next root, already read, arrives after it): each is written as
	// unfinished at once, in constant memory, and still checked.
	if err := s.drain(); err != nil {
		return s.sum, err
	}
	// With no event left, nothing can still be waiting: a request left
	// here would be a silent stall, not a horizon cut.
	if s.h.len() == 0 && s.liveH != nil {
		return s.sum, fmt.Errorf("internal error: request %s stalled in state %d with no event left at %d µs", s.liveH.req.ID, s.liveH.state, s.now)
	}
	for r := s.liveH; r != nil; {
		next := r.lnext
		r.status = trace.StatusUnfinished
		if r.decoding {
			// Decode progress is implicit (see instance): count the
			// tokens of the steps completed before the horizon.
			r.generated = r.gen0 + int32(s.inst[r.inst].step-1-r.s0)
		}
		switch r.state {
		case stPending:
			r.reason = "dependencies unfinished at horizon"
		case stArriving:
			if r.req.ArrivalUS != trace.Null && r.req.ArrivalUS > horizon {
				r.reason = "arrives after horizon"
			}
		}
		s.terminal(r)
		r = next
	}
	if s.err != nil {
		return s.sum, s.err
	}
	for _, in := range s.inst {
		s.sum.Steps += in.steps
		s.sum.Preemptions += in.preemptsN
		s.sum.Evictions += in.kv.evictions
		s.sum.BusyUS = append(s.sum.BusyUS, in.busyUS)
		if s.checks {
			if err := in.kv.check(); err != nil {
				return s.sum, fmt.Errorf("invariant violated: instance %d: %w", in.id, err)
			}
		}
	}
	s.sum.Model = s.model.Name()
	s.sum.KVBlocks = s.cfg.Engine.KVBlocks
	if t := s.sum.Completed + s.sum.Dropped + s.sum.Rejected + s.sum.Unfinished + s.sum.SourceFailed; t != s.sum.Injected {
		return s.sum, fmt.Errorf("invariant violated: %d requests injected but %d accounted for", s.sum.Injected, t)
	}
	if s.opts.Progress != nil {
		s.opts.Progress(s.now, s.sum.Injected)
	}
	return s.sum, nil
}

func (s *sim) newReq() *reqState {
	var r *reqState
	if n := len(s.pool); n > 0 {
		r = s.pool[n-1]
		s.pool = s.pool[:n-1]
	} else {
		r = &reqState{}
	}
	r.reset()
	return r
}

func (s *sim) liveAdd(r *reqState) {
	r.lprev, r.lnext = s.liveT, nil
	if s.liveT != nil {
		s.liveT.lnext = r
	} else {
		s.liveH = r
	}
	s.liveT = r
}

func (s *sim) liveRemove(r *reqState) {
	if r.lprev != nil {
		r.lprev.lnext = r.lnext
	} else {
		s.liveH = r.lnext
	}
	if r.lnext != nil {
		r.lnext.lprev = r.lprev
	} else {
		s.liveT = r.lprev
	}
	r.lprev, r.lnext = nil, nil
}

// register takes a new row into the simulation.
func (s *sim) register(req *trace.Request, row int64) error {
	if _, dup := s.ids[req.ID]; dup {
		return s.rowErr(req, row, "column %s: duplicate id %q", trace.ColRequestID, req.ID)
	}
	r := s.newReq()
	r.req = *req
	r.row = row
	s.ids[req.ID] = r
	s.sum.Injected++
	if n := int64(len(s.ids)); n > s.sum.PeakHeld {
		s.sum.PeakHeld = n
	}
	s.liveAdd(r)
	r.state = stPending
	r.rootArr = req.ArrivalUS
	r.readyAt = math.MinInt64
	if len(req.DependsOn) > 0 {
		r.rootArr = math.MinInt64
	}
	failed := req.SourceStatus == trace.SourceFailed
	var blocked *reqState
	for _, id := range req.DependsOn {
		p := s.ids[id]
		if p == nil {
			where := "in the table"
			if !s.preload {
				where = "among earlier rows (in a table sorted by arrival a request must come after its dependencies)"
			}
			return s.rowErr(req, row, "column %s: %q not found %s", trace.ColDependsOn, id, where)
		}
		if p == r {
			return s.rowErr(req, row, "column %s: depends on itself", trace.ColDependsOn)
		}
		if p.rootArr > r.rootArr {
			r.rootArr = p.rootArr
		}
		if failed {
			continue
		}
		if p.state == stDone {
			if p.status != trace.StatusCompleted && blocked == nil {
				blocked = p
			}
			if p.finished > r.readyAt {
				r.readyAt = p.finished
			}
			continue
		}
		p.children = append(p.children, r)
		r.pending++
	}
	if failed {
		r.status = trace.StatusSourceFailed
		s.terminal(r)
		return nil
	}
	if len(req.DependsOn) == 0 {
		r.state = stArriving
		s.h.push(req.ArrivalUS, evArrival, -1, r)
		return nil
	}
	if blocked != nil {
		r.status = trace.StatusDropped
		r.reason = fmt.Sprintf("dependency %s %s", blocked.req.ID, blocked.status)
		s.terminal(r)
		return nil
	}
	if r.pending == 0 {
		s.ready(r)
	}
	return nil
}

// ready schedules a request whose dependencies have all finished.
func (s *sim) ready(r *reqState) {
	// A dependent never starts before its own recorded arrival, which
	// already includes any think time: delay_us counts from the last
	// dependency's finish only.
	own := r.req.ArrivalUS // trace.Null (MinInt64) when absent
	if r.req.Kind == trace.KindTool {
		r.state = stTool
		start := max(r.readyAt, own, s.now)
		r.req.ArrivalUS = start
		s.h.push(start+r.req.DelayUS, evToolDone, -1, r)
		return
	}
	at := max(r.readyAt+r.req.DelayUS, own, s.now)
	// The dependent's simulated arrival is recorded in arrival_us.
	r.req.ArrivalUS = at
	r.state = stArriving
	s.h.push(at, evArrival, -1, r)
}

// terminal records a final state, writes the result and releases dependents.
func (s *sim) terminal(r *reqState) {
	if r.state == stDone {
		return
	}
	r.state = stDone
	s.liveRemove(r)
	switch r.status {
	case trace.StatusCompleted:
		s.sum.Completed++
		s.sum.CachedTokens += int64(r.cachedTok)
	case trace.StatusDropped:
		s.sum.Dropped++
	case trace.StatusRejected:
		s.sum.Rejected++
	case trace.StatusUnfinished:
		s.sum.Unfinished++
	case trace.StatusSourceFailed:
		s.sum.SourceFailed++
	}
	s.writeResult(r)
	// Release dependents (iteratively: chains can be long).
	s.work = append(s.work[:0], r)
	for len(s.work) > 0 {
		p := s.work[len(s.work)-1]
		s.work = s.work[:len(s.work)-1]
		for _, c := range p.children {
			if c.state == stDone {
				continue
			}
			c.pending--
			if p.status != trace.StatusCompleted {
				if p.status == trace.StatusUnfinished {
					continue // reported with the other unfinished requests
				}
				c.status = trace.StatusDropped
				c.reason = fmt.Sprintf("dependency %s %s", p.req.ID, p.status)
				c.state = stDone
				s.liveRemove(c)
				s.sum.Dropped++
				s.writeResult(c)
				s.work = append(s.work, c)
				continue
			}
			if p.finished > c.readyAt {
				c.readyAt = p.finished
			}
			if c.pending == 0 {
				s.ready(c)
			}
		}
		p.children = p.children[:0]
		s.retire(p)
	}
}

// retire drops a finished request from the id index once no later row can
// name it, and reuses its memory.
func (s *sim) retire(r *reqState) {
	if r.retired {
		return
	}
	r.retired = true
	s.retired.push(r)
	s.purge()
}

func (s *sim) purge() {
	for len(s.retired.h) > 0 && s.retired.h[0].rootArr < s.frontier {
		r := s.retired.pop()
		if s.ids[r.req.ID] == r {
			delete(s.ids, r.req.ID)
		}
		if r.pending == 0 {
			r.req = trace.Request{}
			s.pool = append(s.pool, r)
		}
	}
}

func (s *sim) writeResult(r *reqState) {
	res := &s.res
	*res = trace.Result{Request: r.req, Status: r.status, DropReason: r.reason, InstanceID: r.inst,
		AdmittedUS: r.admitted, RoutedUS: r.routed, EnqueuedUS: r.enqueued, FirstScheduledUS: r.firstSched,
		FirstTokenUS: r.firstTok, FinishedUS: r.finished, TTFTUS: trace.Null, E2EUS: trace.Null, TPOTUS: trace.Null,
		Preemptions: r.preemptions, CachedTokens: r.cachedTok, GeneratedTokens: r.generated}
	arr := r.req.ArrivalUS
	if r.firstTok != trace.Null && arr != trace.Null {
		res.TTFTUS = r.firstTok - arr
	}
	if r.finished != trace.Null && arr != trace.Null {
		res.E2EUS = r.finished - arr
	}
	if r.status == trace.StatusCompleted && r.generated > 1 {
		res.TPOTUS = (r.finished - r.firstTok) / int64(r.generated-1)
	}
	if s.checks && r.status == trace.StatusCompleted && r.req.Kind == trace.KindLLM {
		t := [...]int64{arr, r.routed, r.enqueued, r.firstSched, r.firstTok, r.finished}
		for i := 1; i < len(t); i++ {
			if t[i] == trace.Null || t[i] < t[i-1] {
				s.fail(fmt.Errorf("invariant violated: request %s timestamps out of order (arrival, routed, enqueued, first scheduled, first token, finished) = %v", r.req.ID, t))
				break
			}
		}
		if r.generated != r.req.OutputTokens {
			s.fail(fmt.Errorf("invariant violated: request %s completed with %d of %d tokens", r.req.ID, r.generated, r.req.OutputTokens))
		}
	}
	if err := s.sink.Write(res); err != nil {
		s.fail(err)
	}
}

// arrive runs the router pipeline for a request entering the cluster.
func (s *sim) arrive(r *reqState) {
	if s.checks && len(r.req.DependsOn) > 0 && (r.pending != 0 || s.now < r.readyAt) {
		s.fail(fmt.Errorf("invariant violated: %s started at %d with %d dependencies pending, the last finished at %d", r.req.ID, s.now, r.pending, r.readyAt))
	}
	if r.req.Kind == trace.KindTool {
		r.state = stTool
		s.h.push(s.now+r.req.DelayUS, evToolDone, -1, r)
		return
	}
	v := &s.view
	v.Now, v.r = s.now, r
	if s.snapEvery == 0 {
		s.refreshSnapshot()
	}
	ok, why := s.admission.Admit(&r.req, v)
	if !ok {
		r.status, r.reason = trace.StatusRejected, why
		s.terminal(r)
		return
	}
	r.admitted = s.now
	r.prio = s.priority.Priority(&r.req)
	i := s.routing.Route(&r.req, v)
	if i < 0 || i >= len(s.inst) {
		s.fail(fmt.Errorf("routing policy %s returned instance %d of %d", s.cfg.Router.Routing, i, len(s.inst)))
		return
	}
	in := s.inst[i]
	r.inst = in.id
	r.routed = s.now
	// In int64: input+output can overflow the int32 token counters, and a
	// request's KV must stay within them (blocksFor rounds up by B−1).
	B := int64(in.kv.blockSize)
	tokens := int64(r.req.InputTokens) + int64(max(r.req.OutputTokens, 1)) - 1
	need := (tokens + B - 1) / B
	if need > int64(in.kv.total) || tokens > math.MaxInt32-B {
		r.status = trace.StatusDropped
		if need > int64(in.kv.total) {
			r.reason = fmt.Sprintf("needs %d KV blocks (%d tokens), an instance has %d", need, tokens, in.kv.total)
		} else {
			r.reason = fmt.Sprintf("needs %d KV blocks (%d tokens): more than %d tokens per request", need, tokens, math.MaxInt32-B)
		}
		s.terminal(r)
		return
	}
	in.inflight++
	v.Instances[i].InFlight++
	r.state = stRouted
	s.h.push(s.now+s.alpha.QueueDelay(r.req.InputTokens), evEnqueue, in.id, r)
}

func (s *sim) enqueue(r *reqState) {
	in := s.inst[r.inst]
	in.inflight--
	r.enqueued = s.now
	r.state = stWaiting
	s.enqSeq++
	r.order = s.enqSeq
	in.waiting.push(r)
	s.kick(in)
}

// snapshotBefore takes the router's periodic snapshot due before ev. The
// cluster's state is constant between events, so the state just before ev
// is the state at every snapshot time since the previous event: one refresh
// stands for all of them, and idle stretches cost nothing.
func (s *sim) snapshotBefore(ev *event) {
	s.refreshSnapshot()
	m := ev.t - ev.t%s.snapEvery // last snapshot time <= ev.t
	next := m + s.snapEvery
	if m == ev.t && ev.kind() < evSnapshot {
		next = m // due after the step ends and timers of this instant
	}
	s.snapAt = max(next, s.snapAt+s.snapEvery)
}

func (s *sim) refreshSnapshot() {
	for i, in := range s.inst {
		s.view.Instances[i] = InstanceView{Waiting: in.waiting.len(), Running: in.nrun, InFlight: in.inflight,
			KVUsed: int64(in.kv.used()), KVTotal: int64(in.kv.total)}
	}
}

// preloadAll registers an in-memory table: graph checks on the whole table,
// then every row in dependency order.
// MaxTimeUS bounds arrival_us and delay_us (about 36,000 years), so that
// adding delays, alpha and step times to them cannot overflow int64.
const MaxTimeUS = 1 << 60

// validateRow is trace's row check plus the engine's time bounds.
func validateRow(r *trace.Request) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.ArrivalUS > MaxTimeUS {
		return fmt.Errorf("column %s: expected <= %d (2^60 µs), found %d", trace.ColArrivalUS, int64(MaxTimeUS), r.ArrivalUS)
	}
	if r.DelayUS > MaxTimeUS {
		return fmt.Errorf("column %s: expected <= %d (2^60 µs), found %d", trace.ColDelayUS, int64(MaxTimeUS), r.DelayUS)
	}
	return nil
}

func (s *sim) preloadAll(reqs []trace.Request) error {
	s.preload = true
	idx := make(map[string]int, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if err := validateRow(r); err != nil {
			return s.rowErr(r, int64(i+1), "%v", err)
		}
		if j, dup := idx[r.ID]; dup {
			return s.rowErr(r, int64(i+1), "column %s: duplicate id %q (first at row %d)", trace.ColRequestID, r.ID, j+1)
		}
		idx[r.ID] = i
	}
	// Kahn's algorithm in row order: roots by arrival, then dependents.
	indeg := make([]int32, len(reqs))
	kids := make([][]int32, len(reqs))
	for i := range reqs {
		for _, d := range reqs[i].DependsOn {
			j, ok := idx[d]
			if !ok {
				return s.rowErr(&reqs[i], int64(i+1), "column %s: %q not found in the table", trace.ColDependsOn, d)
			}
			indeg[i]++
			kids[j] = append(kids[j], int32(i))
		}
	}
	order := make([]int32, 0, len(reqs))
	for i := range reqs {
		if indeg[i] == 0 {
			order = append(order, int32(i))
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		return reqs[order[a]].ArrivalUS < reqs[order[b]].ArrivalUS
	})
	for k := 0; k < len(order); k++ {
		for _, c := range kids[order[k]] {
			indeg[c]--
			if indeg[c] == 0 {
				order = append(order, c)
			}
		}
	}
	if len(order) < len(reqs) {
		for i := range reqs {
			if indeg[i] > 0 {
				return s.rowErr(&reqs[i], int64(i+1), "column %s: dependency cycle through this request", trace.ColDependsOn)
			}
		}
	}
	for _, i := range order {
		s.rows++
		if err := s.register(&reqs[i], int64(i+1)); err != nil {
			return err
		}
	}
	s.eof = true
	s.frontier = math.MaxInt64
	s.purge()
	return nil
}

// readNextRoot reads rows until the next simulated root request (whose
// arrival event it schedules) or the end of the input. Dependents read on
// the way are registered, so every request of a session is known before
// the clock passes the next root's arrival.
func (s *sim) readNextRoot() error {
	for !s.eof {
		if s.bufPos >= len(s.buf) {
			var err error
			s.buf, err = s.src.Next(s.buf)
			s.bufPos = 0
			if err == io.EOF {
				s.eof = true
				s.frontier = math.MaxInt64
				s.purge()
				if len(s.buf) == 0 {
					return nil
				}
			} else if err != nil {
				return err
			}
			if len(s.buf) == 0 {
				continue
			}
		}
		req := &s.buf[s.bufPos]
		s.bufPos++
		s.rows++
		if err := validateRow(req); err != nil {
			return s.rowErr(req, s.rows, "%v", err)
		}
		root := len(req.DependsOn) == 0
		if root {
			if req.ArrivalUS < s.lastRoot {
				return s.rowErr(req, s.rows, "column %s: the table promises %s=arrival but %d comes after %d", trace.ColArrivalUS, trace.MetaSorted, req.ArrivalUS, s.lastRoot)
			}
			s.lastRoot = req.ArrivalUS
			if req.ArrivalUS > s.frontier {
				s.frontier = req.ArrivalUS
				s.purge()
			}
		}
		if err := s.register(req, s.rows); err != nil {
			return err
		}
		if root && req.SourceStatus != trace.SourceFailed {
			s.nextRoot = s.ids[req.ID]
			return nil
		}
	}
	return nil
}

func (s *sim) drain() error {
	for !s.eof {
		if s.bufPos >= len(s.buf) {
			var err error
			s.buf, err = s.src.Next(s.buf)
			s.bufPos = 0
			if err == io.EOF {
				s.eof = true
			} else if err != nil {
				return err
			}
			continue
		}
		req := &s.buf[s.bufPos]
		s.bufPos++
		s.rows++
		if err := validateRow(req); err != nil {
			return s.rowErr(req, s.rows, "%v", err)
		}
		if len(req.DependsOn) == 0 {
			if req.ArrivalUS < s.lastRoot {
				return s.rowErr(req, s.rows, "column %s: the table promises %s=arrival but %d comes after %d", trace.ColArrivalUS, trace.MetaSorted, req.ArrivalUS, s.lastRoot)
			}
			s.lastRoot = req.ArrivalUS
		}
		r := &s.drainR
		r.reset()
		r.req = *req
		r.status, r.reason = trace.StatusUnfinished, "arrives after horizon"
		if req.SourceStatus == trace.SourceFailed {
			r.status, r.reason = trace.StatusSourceFailed, ""
			s.sum.SourceFailed++
		} else {
			s.sum.Unfinished++
		}
		s.sum.Injected++
		s.writeResult(r)
	}
	return s.err
}

// retireHeap orders finished requests by the root arrival they hang off.
type retireHeap struct{ h []*reqState }

func (q *retireHeap) push(r *reqState) {
	q.h = append(q.h, r)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].rootArr <= h[i].rootArr {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *retireHeap) pop() *reqState {
	h := q.h
	n := len(h) - 1
	out := h[0]
	h[0] = h[n]
	h[n] = nil
	h = h[:n]
	q.h = h
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].rootArr < h[l].rootArr {
			m = r
		}
		if h[i].rootArr <= h[m].rootArr {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return out
}
