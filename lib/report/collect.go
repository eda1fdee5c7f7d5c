package report

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/blis-sim/blis/lib/bug"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// Result statuses, in table order.
const (
	stCompleted = iota
	stRejected
	stDropped
	stTimedOut
	stUnfinished
	stSourceFailed
	stFailed // blis-load: the server or the connection failed it
	nStatus
)

var statusNames = [nStatus]string{trace.StatusCompleted, trace.StatusRejected, trace.StatusDropped,
	trace.StatusTimedOut, trace.StatusUnfinished, trace.StatusSourceFailed, trace.StatusFailed}

// Latency metrics, in table order.
const (
	mTTFT = iota
	mTPOT
	mE2E
	mQueue   // enqueued_us → first_scheduled_us
	mArrival // arrival → first_scheduled_us
	nMetric
)

var metricNames = [nMetric]string{"ttft", "tpot", "e2e", "queue_enqueued", "queue_arrival"}

// GroupColumns maps --by values to the column they group on.
var GroupColumns = map[string]string{
	"instance": trace.ColInstanceID, "tenant": trace.ColTenantID, "slo_class": trace.ColSLOClass,
	"model": trace.ColModel, "session": trace.ColSessionID, "step_id": trace.ColStepID,
	"deployment": trace.ColDeployment, "replica": trace.ColReplicaID,
	"request_type": trace.ColRequestType, "stage": trace.ColStage,
}

// GroupNames lists the --by values in help order.
var GroupNames = []string{"instance", "replica", "deployment", "tenant", "slo_class", "model", "session", "step_id", "request_type", "stage"}

// summaryColumns are needed by the default tables.
var summaryColumns = []string{trace.ColStatus, trace.ColArrivalUS, trace.ColInputTokens, trace.ColGeneratedTokens,
	trace.ColEnqueuedUS, trace.ColFirstScheduledUS, trace.ColFirstTokenUS, trace.ColFinishedUS,
	trace.ColTTFTUS, trace.ColTPOTUS, trace.ColE2EUS, trace.ColCachedTokens, trace.ColPreemptions}

// acc accumulates one group's statistics. Light accumulators (per tenant,
// per SLO class) keep counts only, no distributions.
type acc struct {
	status          [nStatus]int64
	llm, tool       int64
	completed       int64 // completed llm requests
	inTok, outTok   int64 // of completed llm requests
	d               [nMetric]*Dist
	schedIn, cached int64 // over llm requests that were scheduled
	preempt         int64
	preempted       int64
	// At the router: admitted llm requests, those routed later than
	// admitted or never routed (held by the routing policy, or queued at
	// the gateway), and the µs between admission and routing of the routed.
	admitted, waited, waitN, waitUS int64
	sloN                            int64
	sloHas                          [slo.N]int64 // subject rows whose SLO has a target for the metric
	sloMet                          [slo.N]int64
	sloAll                          int64
	sloScope                        *slo.Targets // the SLO of the first subject row
	sloMixed                        bool         // rows under different SLOs
}

func newAcc(limit int, light bool, b *budget) *acc {
	a := &acc{}
	if !light {
		for m := range a.d {
			a.d[m] = newDistBudget(limit, b)
		}
	}
	return a
}

func (a *acc) total() int64 { return a.llm + a.tool }

// rowv is one decoded row: only what the statistics need.
type rowv struct {
	st                                 int
	tool                               bool
	hasSched, hasEnq, hasTTFT, hasTPOT bool
	hasE2E, hasEff                     bool
	ran                                bool // scheduled at least once (or, measured, produced a token)
	eff, sched, enq, ttft, tpot, e2e   int64
	in, gen, cached, preempt           int64
	adm, routed                        int64 // admitted_us, routed_us (row.Null: none)
	slo                                *slo.Targets
}

func (a *acc) add(r *rowv) {
	a.status[r.st]++
	if r.tool {
		a.tool++
		return
	}
	a.llm++
	if r.ran {
		a.schedIn += r.in
		a.cached += r.cached
	}
	a.preempt += r.preempt
	if r.preempt > 0 {
		a.preempted++
	}
	if r.adm != trace.Null {
		a.admitted++
		switch {
		case r.routed == trace.Null:
			a.waited++ // never routed: lost or unfinished while it waited
		case r.routed > r.adm:
			a.waited++
			a.waitN++
			a.waitUS += r.routed - r.adm
		default:
			a.waitN++
		}
	}
	completed := r.st == stCompleted
	if completed {
		a.completed++
		a.inTok += r.in
		a.outTok += r.gen
		if a.d[0] != nil {
			if r.hasTTFT {
				a.d[mTTFT].Add(r.ttft)
			}
			if r.hasTPOT {
				a.d[mTPOT].Add(r.tpot)
			}
			if r.hasE2E {
				a.d[mE2E].Add(r.e2e)
			}
			if r.hasSched && r.hasEnq {
				a.d[mQueue].Add(r.sched - r.enq)
			}
			if r.hasSched && r.hasEff {
				a.d[mArrival].Add(r.sched - r.eff)
			}
		}
	}
	if r.slo == nil || r.st == stSourceFailed {
		return
	}
	a.sloN++
	if a.sloScope == nil {
		a.sloScope = r.slo
	} else if a.sloScope != r.slo {
		a.sloMixed = true
	}
	for m, t := range r.slo.Target {
		if t > 0 {
			a.sloHas[m]++
		}
	}
	if !completed {
		return
	}
	all := true
	for m, t := range r.slo.Target {
		if t == 0 {
			continue // not a target of this row's SLO: neither met nor missed
		}
		var ok bool
		switch m {
		case slo.TTFT:
			ok = r.hasTTFT && r.ttft <= t
		case slo.TPOT:
			ok = !r.hasTPOT || r.tpot <= t // no gap to measure with one output token
		case slo.E2E:
			ok = r.hasE2E && r.e2e <= t
		}
		if ok {
			a.sloMet[m]++
		}
		all = all && ok
	}
	if all {
		a.sloAll++
	}
}

// instLoad is what one instance served.
type instLoad struct {
	completed, inTok, outTok int64
}

// run is everything read from one results table.
type run struct {
	meta       trace.Meta
	path       string
	rows       int64
	budget     *budget
	all        *acc
	groupCol   string
	groupKey   *strKey
	groupInt   map[int64]int32
	groupNames []string
	groups     []*acc
	noGroup    *acc
	tenantKey  *strKey
	tenants    []*acc
	classKey   *strKey
	classes    []*acc
	inst       map[int64]*instLoad
	start, end int64
	hasRec     bool
	rec        [3][2]*Dist // ttft, e2e, itl × sim, real
	sess       *sessions
	done, toks *series
	kv         kvStats
	arr        *series          // llm arrivals
	reasonKey  *strKey          // drop_reason, when the table has it
	reasons    [][nStatus]int64 // rows by drop_reason code and status
	ch         *runCharts       // chart data (Options.Charts), else nil
}

func (r *run) span() float64 {
	if r.end <= r.start || r.start == math.MaxInt64 {
		return math.NaN()
	}
	return float64(r.end - r.start)
}

type reader struct {
	arr, enq, sched, first, fin, ttft, tpot, e2e, in, gen, cached, preempt, inst icol
	recT, recE, recI, loop, delay, adm, routed                                   icol
	status, kind                                                                 *strKey
	stIdx                                                                        []int8
	isTool                                                                       []int8
	grp                                                                          icol
	reqID, deps, step, reason                                                    arrow.Array
	rec                                                                          arrow.RecordBatch
	kv                                                                           kvReader
}

func need(path string, s *arrow.Schema, view string, cols ...string) error {
	for _, c := range cols {
		if colIndex(s, c) < 0 {
			return fmt.Errorf("%s: not usable for the %s: the table has no column %s", path, view, c)
		}
	}
	return nil
}

// readRun streams one results table, reading only the columns it needs.
func readRun(path string, opt *Options) (*run, error) {
	src, err := trace.Open(path, opt.Stdin)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := src.Expect(trace.TableResults); err != nil {
		return nil, err
	}
	s := src.Schema()
	if colIndex(s, trace.ColStatus) < 0 {
		return nil, fmt.Errorf("%s: not a results table: the table has no column %s (is it a requests table? run it through blis-sim first)", src.Path, trace.ColStatus)
	}
	if err := need(src.Path, s, "summary tables", summaryColumns...); err != nil {
		return nil, err
	}
	for _, c := range []string{trace.ColArrivalUS, trace.ColEnqueuedUS, trace.ColFirstScheduledUS, trace.ColFirstTokenUS,
		trace.ColFinishedUS, trace.ColTTFTUS, trace.ColTPOTUS, trace.ColE2EUS, trace.ColInputTokens, trace.ColGeneratedTokens,
		trace.ColCachedTokens, trace.ColPreemptions, trace.ColInstanceID, trace.ColRecordedTTFTUS, trace.ColRecordedE2EUS,
		trace.ColRecordedITLUS, trace.ColLoopIteration, trace.ColDelayUS, trace.ColAdmittedUS, trace.ColRoutedUS} {
		if err := checkInt(src.Path, s, c); err != nil {
			return nil, err
		}
	}
	for _, c := range []string{trace.ColStatus, trace.ColKind, trace.ColTenantID, trace.ColSLOClass, trace.ColModel,
		trace.ColSessionID, trace.ColStepID, trace.ColRequestID, trace.ColDropReason} {
		if err := checkStr(src.Path, s, c); err != nil {
			return nil, err
		}
	}
	bud := &budget{max: int64(opt.RunBudget)}
	r := &run{meta: src.Meta(), path: src.Path, budget: bud, all: newAcc(opt.ExactLimit, false, bud), inst: map[int64]*instLoad{},
		start: math.MaxInt64, end: math.MinInt64, done: newSeries(), toks: newSeries(), arr: newSeries()}
	if opt.By != "" {
		r.groupCol = GroupColumns[opt.By]
		if r.groupCol == "" {
			return nil, fmt.Errorf("--by %q: expected one of %v", opt.By, GroupNames)
		}
		if err := need(src.Path, s, "--by "+opt.By+" grouping", r.groupCol); err != nil {
			return nil, err
		}
		if r.groupCol == trace.ColInstanceID {
			r.groupInt = map[int64]int32{}
		} else {
			r.groupKey = newStrKey()
		}
	}
	if !opt.SLOs.Empty() && len(opt.SLOs.ByClass) > 0 {
		if err := need(src.Path, s, "per-class --slo", trace.ColSLOClass); err != nil {
			return nil, err
		}
	}
	if colIndex(s, trace.ColTenantID) >= 0 {
		r.tenantKey = newStrKey()
	}
	if colIndex(s, trace.ColSLOClass) >= 0 {
		r.classKey = newStrKey()
	}
	if colIndex(s, trace.ColDropReason) >= 0 {
		r.reasonKey = newStrKey()
	}
	r.hasRec = colIndex(s, trace.ColRecordedTTFTUS) >= 0 || colIndex(s, trace.ColRecordedE2EUS) >= 0 || colIndex(s, trace.ColRecordedITLUS) >= 0
	if r.hasRec {
		for i := range r.rec {
			r.rec[i] = [2]*Dist{newDistBudget(opt.ExactLimit, bud), newDistBudget(opt.ExactLimit, bud)}
		}
	}
	if colIndex(s, trace.ColSessionID) >= 0 {
		if err := need(src.Path, s, "session table", trace.ColRequestID); err != nil {
			return nil, err
		}
		if i := colIndex(s, trace.ColDependsOn); i >= 0 {
			lt, ok := s.Field(i).Type.(*arrow.ListType)
			if !ok || (lt.Elem().ID() != arrow.STRING && lt.Elem().ID() != arrow.LARGE_STRING) {
				return nil, fmt.Errorf("%s: column %s: expected list<string>, found %s", src.Path, trace.ColDependsOn, s.Field(i).Type)
			}
		}
		r.sess = newSessions(opt.ExactLimit)
	}
	if opt.Charts {
		r.ch = newRunCharts()
		r.ch.xfer = colIndex(s, trace.ColKVTransferUS) >= 0
	}
	rd := &reader{status: newStrKey(), kind: newStrKey()}
	idx := func(name string) int { return colIndex(s, name) }
	// Decoding the next batch overlaps with aggregating this one: on two cores
	// that is most of the wall time of a large report.
	batches, stop := prefetch(src)
	defer stop()
	for it := range batches {
		if errors.Is(it.err, io.EOF) {
			break
		}
		if it.err != nil {
			return nil, it.err
		}
		err := r.batch(rd, it.rec, idx, opt)
		it.rec.Release()
		if err != nil {
			return nil, err
		}
	}
	if r.sess != nil && len(r.sess.nodes) == 0 {
		r.sess = nil
	}
	return r, nil
}

func (r *run) batch(rd *reader, rec arrow.RecordBatch, idx func(string) int, opt *Options) error {
	for _, b := range []struct {
		c    *icol
		name string
	}{{&rd.arr, trace.ColArrivalUS}, {&rd.enq, trace.ColEnqueuedUS}, {&rd.sched, trace.ColFirstScheduledUS},
		{&rd.first, trace.ColFirstTokenUS}, {&rd.fin, trace.ColFinishedUS}, {&rd.ttft, trace.ColTTFTUS},
		{&rd.tpot, trace.ColTPOTUS}, {&rd.e2e, trace.ColE2EUS}, {&rd.in, trace.ColInputTokens},
		{&rd.gen, trace.ColGeneratedTokens}, {&rd.cached, trace.ColCachedTokens}, {&rd.preempt, trace.ColPreemptions},
		{&rd.inst, trace.ColInstanceID}, {&rd.recT, trace.ColRecordedTTFTUS}, {&rd.recE, trace.ColRecordedE2EUS},
		{&rd.recI, trace.ColRecordedITLUS}, {&rd.loop, trace.ColLoopIteration}, {&rd.delay, trace.ColDelayUS},
		{&rd.adm, trace.ColAdmittedUS}, {&rd.routed, trace.ColRoutedUS}} {
		b.c.bind(rec, idx(b.name))
	}
	rd.kv.bind(rec, idx)
	rd.status.bind(rec, idx(trace.ColStatus))
	rd.kind.bind(rec, idx(trace.ColKind))
	if r.groupKey != nil {
		r.groupKey.bind(rec, idx(r.groupCol))
	}
	if r.groupInt != nil {
		rd.grp.bind(rec, idx(r.groupCol))
	}
	if r.tenantKey != nil {
		r.tenantKey.bind(rec, idx(trace.ColTenantID))
	}
	if r.classKey != nil {
		r.classKey.bind(rec, idx(trace.ColSLOClass))
	}
	if r.reasonKey != nil {
		r.reasonKey.bind(rec, idx(trace.ColDropReason))
	}
	if r.sess != nil {
		r.sess.key.bind(rec, idx(trace.ColSessionID))
		rd.reqID = rec.Column(idx(trace.ColRequestID))
		rd.deps, rd.step = nil, nil
		if j := idx(trace.ColDependsOn); j >= 0 {
			rd.deps = rec.Column(j)
		}
		if j := idx(trace.ColStepID); j >= 0 {
			rd.step = rec.Column(j)
		}
		rd.reason = nil
		if j := idx(trace.ColDropReason); j >= 0 {
			rd.reason = rec.Column(j)
		}
	}
	if r.ch != nil {
		rd.reqID = nil
		if j := idx(trace.ColRequestID); j >= 0 {
			rd.reqID = rec.Column(j)
		}
	}
	rd.rec = rec
	n := int(rec.NumRows())
	var v rowv
	for i := 0; i < n; i++ {
		r.rows++
		sc := rd.status.code(i)
		for int(sc) >= len(rd.stIdx) {
			st := int8(-1)
			for j, name := range statusNames {
				if rd.status.names[len(rd.stIdx)] == name {
					st = int8(j)
				}
			}
			rd.stIdx = append(rd.stIdx, st)
		}
		if sc < 0 || rd.stIdx[sc] < 0 {
			found := "null"
			if sc >= 0 {
				found = strconv.Quote(rd.status.names[sc])
			}
			return r.rowErr(rd, i, fmt.Errorf("column %s: expected one of %v, found %s", trace.ColStatus, statusNames, found))
		}
		v.st = int(rd.stIdx[sc])
		kc := rd.kind.code(i)
		for int(kc) >= len(rd.isTool) {
			t := int8(-1)
			switch rd.kind.names[len(rd.isTool)] {
			case trace.KindLLM:
				t = 0
			case trace.KindTool:
				t = 1
			}
			rd.isTool = append(rd.isTool, t)
		}
		v.tool = false
		if kc >= 0 {
			if rd.isTool[kc] < 0 {
				return r.rowErr(rd, i, fmt.Errorf("column %s: expected %q or %q, found %q", trace.ColKind, trace.KindLLM, trace.KindTool, rd.kind.names[kc]))
			}
			v.tool = rd.isTool[kc] == 1
		}
		arr, hasArr := rd.arr.get(i)
		fin, hasFin := rd.fin.get(i)
		first, hasFirst := rd.first.get(i)
		v.sched, v.hasSched = rd.sched.get(i)
		v.ran = v.hasSched || hasFirst // a load generator sees first tokens, not scheduling
		v.enq, v.hasEnq = rd.enq.get(i)
		v.ttft, v.hasTTFT = rd.ttft.get(i)
		v.tpot, v.hasTPOT = rd.tpot.get(i)
		v.e2e, v.hasE2E = rd.e2e.get(i)
		v.in = rd.in.or(i, 0)
		v.gen = rd.gen.or(i, 0)
		v.cached = rd.cached.or(i, 0)
		v.preempt = rd.preempt.or(i, 0)
		v.adm = rd.adm.or(i, trace.Null)
		v.routed = rd.routed.or(i, trace.Null)
		// A dependent request has no arrival_us; its arrival is when it became ready.
		switch {
		case hasArr:
			v.eff, v.hasEff = arr, true
		case hasFin && v.hasE2E:
			v.eff, v.hasEff = fin-v.e2e, true
		case hasFirst && v.hasTTFT:
			v.eff, v.hasEff = first-v.ttft, true
		default:
			v.hasEff = false
		}
		if v.hasEff && v.eff < r.start {
			r.start = v.eff
		}
		for _, t := range [...]struct {
			v  int64
			ok bool
		}{{fin, hasFin}, {first, hasFirst}, {v.sched, v.hasSched}, {v.enq, v.hasEnq}, {v.eff, v.hasEff}} {
			if t.ok && t.v > r.end {
				r.end = t.v
			}
		}
		class := ""
		cc := int32(-1)
		if r.classKey != nil {
			if cc = r.classKey.code(i); cc >= 0 {
				class = r.classKey.names[cc]
			}
		}
		v.slo = opt.SLOs.For(class)
		r.all.add(&v)
		if g := r.group(rd, i, opt); g != nil {
			g.add(&v)
		}
		if r.tenantKey != nil {
			if tc := r.tenantKey.code(i); tc >= 0 {
				r.tenants = grow(r.tenants, tc)
				r.tenants[tc].add(&v)
			}
		}
		if cc >= 0 {
			r.classes = grow(r.classes, cc)
			r.classes[cc].add(&v)
		}
		if !v.tool {
			r.llmRow(rd, i, &v, fin, hasFin)
			if r.ch != nil {
				r.ch.row(rd, i, &v, fin, hasFin)
			}
			if rd.kv.on {
				r.kv.add(&rd.kv, i, &v, opt.ExactLimit, r.budget)
			}
		}
		if r.reasonKey != nil && v.st != stCompleted {
			if c := r.reasonKey.code(i); c >= 0 {
				for int(c) >= len(r.reasons) {
					r.reasons = append(r.reasons, [nStatus]int64{})
				}
				r.reasons[c][v.st]++
			}
		}
		if r.sess != nil {
			if sc := r.sess.key.code(i); sc >= 0 {
				r.sess.add(sc, rd, i, &v, hasArr, arr, fin, hasFin)
				if r.ch != nil {
					r.sess.times = append(r.sess.times, sessTimes{sched: orNull(v.sched, v.hasSched), first: orNull(first, hasFirst), in: v.in, gen: v.gen})
				}
			}
		}
	}
	return nil
}

func (r *run) llmRow(rd *reader, i int, v *rowv, fin int64, hasFin bool) {
	if id, ok := rd.inst.get(i); ok {
		l := r.inst[id]
		if l == nil {
			l = &instLoad{}
			r.inst[id] = l
		}
		if v.st == stCompleted {
			l.completed++
			l.inTok += v.in
			l.outTok += v.gen
		}
	}
	if v.hasEff {
		r.arr.add(v.eff, 1)
	}
	if v.st == stCompleted {
		if hasFin && fin >= 0 {
			r.done.add(fin, 1)
			r.toks.add(fin, float64(v.gen))
		}
		if r.hasRec {
			if x, ok := rd.recT.get(i); ok && v.hasTTFT {
				r.rec[0][0].Add(v.ttft)
				r.rec[0][1].Add(x)
			}
			if x, ok := rd.recE.get(i); ok && v.hasE2E {
				r.rec[1][0].Add(v.e2e)
				r.rec[1][1].Add(x)
			}
			if x, ok := rd.recI.get(i); ok && v.hasTPOT {
				r.rec[2][0].Add(v.tpot)
				r.rec[2][1].Add(x)
			}
		}
	}
}

func grow(s []*acc, c int32) []*acc {
	for int(c) >= len(s) {
		s = append(s, newAcc(0, true, nil))
	}
	return s
}

func (r *run) group(rd *reader, i int, opt *Options) *acc {
	var c int32 = -1
	switch {
	case r.groupKey != nil:
		c = r.groupKey.code(i)
	case r.groupInt != nil:
		if id, ok := rd.grp.get(i); ok {
			var seen bool
			if c, seen = r.groupInt[id]; !seen {
				c = int32(len(r.groupInt))
				r.groupInt[id] = c
				r.groupNames = append(r.groupNames, strconv.FormatInt(id, 10))
			}
		}
	default:
		return nil
	}
	if c < 0 {
		if r.noGroup == nil {
			r.noGroup = newAcc(opt.ExactLimit, false, r.budget)
		}
		return r.noGroup
	}
	for int(c) >= len(r.groups) {
		r.groups = append(r.groups, newAcc(opt.ExactLimit, false, r.budget))
	}
	return r.groups[c]
}

func (r *run) names() []string {
	if r.groupKey != nil {
		return r.groupKey.names
	}
	return r.groupNames
}

func (r *run) rowErr(rd *reader, i int, err error) error {
	id := ""
	if j := colIndex(rd.rec.Schema(), trace.ColRequestID); j >= 0 {
		id = trace.StringAt(rd.rec.Column(j), i)
	}
	return &trace.RowError{Path: r.path, Row: r.rows, RequestID: id, Err: err}
}

type batchItem struct {
	rec arrow.RecordBatch
	err error
}

// prefetch reads batches on its own goroutine, one or two ahead. Each batch is
// retained so it outlives the reader's next call; the consumer releases it.
// stop must be called before the source is closed.
func prefetch(src *trace.Source) (<-chan batchItem, func()) {
	ch := make(chan batchItem, 2)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		defer bug.Catch()
		for {
			rec, err := src.Next()
			if err == nil {
				rec.Retain()
			}
			select {
			case ch <- batchItem{rec, err}:
			case <-done:
				if rec != nil {
					rec.Release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch, func() {
		close(done)
		for it := range ch {
			if it.rec != nil {
				it.rec.Release()
			}
		}
	}
}
