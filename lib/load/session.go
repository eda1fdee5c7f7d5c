package load

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/blis-sim/blis/lib/bug"
	"github.com/blis-sim/blis/lib/load/internal/wait"
	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// Timing says when root requests (rows with no depends_on) are due.
type Timing uint8

const (
	// TimingTrace: at arrival_us / Speedup.
	TimingTrace Timing = iota
	// TimingPoisson: a Poisson stream at Rate roots per second.
	TimingPoisson
	// TimingOffline: all at once at t = 0 (with Concurrency, a closed loop).
	TimingOffline
)

func (t Timing) String() string {
	return [...]string{"trace", "poisson", "offline"}[t]
}

// ResultSink receives one result per row. *trace.ResultWriter satisfies it.
type ResultSink interface{ Write(*trace.Result) error }

// ChunkSink receives the per-request event log. *trace.ChunkWriter
// satisfies it.
type ChunkSink interface{ Write(*trace.Chunk) error }

// Options control a session.
type Options struct {
	Timing  Timing
	Speedup float64 // trace timing: arrival_us and delay_us are divided by it
	Rate    float64 // Poisson timing: roots per second
	Seed    uint64  // Poisson arrivals and prompts
	// Concurrency caps the requests in flight (0 = no cap). With offline
	// timing it makes a closed loop: the next request goes when one ends.
	Concurrency int
	// Duration stops issuing this long after the start (0 = never).
	Duration time.Duration
	// Limit uses only the first Limit rows of the table, in session order
	// (0 = all).
	Limit int64
	// Warmup is the number of warm-up requests Session.Warmup sends,
	// shaped like the session's first llm rows, with prompts that share
	// nothing with them; they are not in the results.
	Warmup int
	// ClientTimeout gives up on a request not finished this long after it
	// was sent, unless its row has a timeout_us (0 = never).
	ClientTimeout time.Duration
	// Drain is how long requests in flight may finish after the session
	// stops issuing (--duration, Stop); the rest are cancelled.
	Drain   time.Duration
	Prompts Prompts
	// Lead arms a request this long before it is due, so its goroutine
	// has built the body and waits on its own timer (default 5 ms: the
	// session's own wake-ups ride Go's timers, up to a millisecond late).
	Lead time.Duration
	// MaxEvent bounds one server-sent event (default 16 MiB).
	MaxEvent int

	Results  ResultSink
	Chunks   ChunkSink // may be nil
	Progress func(Progress)
	// ProgressEvery is how often Progress is called (default 1 s).
	ProgressEvery time.Duration
}

// Progress is the session's state, for the progress line.
type Progress struct {
	Elapsed   time.Duration
	Done      int64 // rows with a result (of Stats.Rows)
	Sent      int64 // sent or about to be (armed)
	InFlight  int
	Completed int64
	Errors    int64 // failed, rejected and timed out
}

// Summary is what a session did.
type Summary struct {
	// Results by status; they add up to Rows.
	Rows, Completed, Failed, Rejected, TimedOut, Dropped, Unfinished, SourceFailed int64
	Sent                                                                           int64         // HTTP requests started
	Elapsed                                                                        time.Duration // session start to the last result
	LastSent                                                                       int64         // µs of the last request sent
	Tokens                                                                         int64         // generated tokens of completed requests
	// IssueLag is sent − due over requests sent (µs), as the chunks
	// table's due and sent events give it: how late requests went, a
	// --concurrency slot's wait included; offline, where nothing has a due
	// time, sent − the moment the request was armed. SlotWait is the part
	// spent waiting for a --concurrency slot after being due (timed
	// schedules with a cap only).
	IssueLag, SlotWait *hdrhistogram.Histogram
	// Usage: requests whose server reported token usage; InputDiffers and
	// OutputDiffers count completed requests whose reported prompt or
	// generated tokens differ from the row's input_tokens/output_tokens.
	Usage, InputDiffers, OutputDiffers int64
	// Reasons counts the failed, rejected, timed-out and dropped rows by
	// kind (an HTTP status, an error class: FailureKind), each with its
	// first message as the example, most frequent first within a status:
	// every kind, for trace.WriteReasons.
	Reasons []trace.ReasonCount
	// Stopped says why the session stopped before the end of the table.
	Stopped string
	// PeakHeld is the most rows held in memory at once (in flight, waiting,
	// or finished but still nameable by a later row): what memory grows
	// with on a sorted table.
	PeakHeld int
	Warmup   WarmupSummary
	// Start is the wall-clock time of the session's t = 0.
	Start time.Time
}

// WarmupSummary describes the warm-up requests.
type WarmupSummary struct {
	Sent, Completed int64
	FirstError      string
	Stopped         bool // Stop came during the warm-up
}

// Session is one run of a table against a server.
type Session struct {
	t      *Table
	target *Target
	hc     *http.Client
	opts   Options
	model  []byte // JSON-encoded target model

	stopReq  chan string
	abortReq chan struct{}
	stopOnce sync.Once
	abrtOnce sync.Once

	// run state, owned by Run's goroutine
	clock          Clock
	g              *graph
	src            rowSource
	rowsRead       int64
	exhausted      bool
	readAhead      *node // the last root read, not yet armed (or due, when timed)
	timers         minHeap[timer]
	seq            uint64
	qDeps          fifo
	qRoots         fifo
	inFlight       int
	stopping       bool
	stopWhy        string
	stopCh         chan struct{} // closed when issuing stops: armed requests not sent give up
	flightCtx      context.Context
	cancel         context.CancelCauseFunc
	done           chan *outcome
	out            chan writeItem
	werr           chan error
	poissonUS      float64
	poissonStarted bool
	arrivals       interface{ ExpFloat64() float64 }
	sum            Summary
	work           []*node
	warmShapes     [][2]int32
	warm           WarmupSummary
	reasons        trace.ReasonTally
}

type timer struct {
	fire int64 // when to act (an LLM request: due − lead)
	seq  uint64
	n    *node
	tool bool // a tool step's timer ends (fire = its finish)
}

// NewSession prepares a session of table t against target. st is the
// table's Check (its first llm rows shape the warm-up requests).
func NewSession(t *Table, st *Stats, target *Target, hc *http.Client, opts Options) *Session {
	if opts.Lead == 0 {
		opts.Lead = 5 * time.Millisecond
	}
	if opts.MaxEvent == 0 {
		opts.MaxEvent = 16 << 20
	}
	if opts.ProgressEvery == 0 {
		opts.ProgressEvery = time.Second
	}
	if opts.Speedup == 0 {
		opts.Speedup = 1
	}
	s := &Session{t: t, target: target, hc: hc, opts: opts, model: jsonString(target.Model),
		stopReq: make(chan string, 1), abortReq: make(chan struct{})}
	if st != nil {
		s.warmShapes = st.Shapes
	}
	return s
}

// Stop ends issuing (safe from any goroutine; the first reason counts):
// requests in flight may finish for Options.Drain, the rest of the table is
// not read, and rows read but not sent are written as unfinished.
func (s *Session) Stop(reason string) {
	s.stopOnce.Do(func() { s.stopReq <- reason })
}

// Abort stops waiting for requests in flight (a second interrupt).
func (s *Session) Abort() { s.abrtOnce.Do(func() { close(s.abortReq) }) }

// SetSinks sets where results (and, when chunks is not nil, events) go.
func (s *Session) SetSinks(results ResultSink, chunks ChunkSink) {
	s.opts.Results, s.opts.Chunks = results, chunks
}

// SetProgress sets the progress callback.
func (s *Session) SetProgress(f func(Progress)) { s.opts.Progress = f }

// Run runs the session until the table is done or it is stopped, writing one result per row read. The error is a bad
// row met on the way (the results are then incomplete) or a failing sink.
func (s *Session) Run(ctx context.Context) (Summary, error) {
	s.sum.IssueLag = hdrhistogram.New(0, 3600e6, 3)
	s.sum.SlotWait = hdrhistogram.New(0, 3600e6, 3)
	s.sum.Warmup = s.warm
	src, err := s.t.rowsFrom()
	if err != nil {
		return s.sum, err
	}
	s.src = src
	defer src.close()
	s.g = newGraph(s.t.Path, true)
	s.timers.less = func(a, b timer) bool { return a.fire < b.fire || a.fire == b.fire && a.seq < b.seq }
	s.stopCh = make(chan struct{})
	s.flightCtx, s.cancel = context.WithCancelCause(context.Background())
	defer s.cancel(nil)
	s.done = make(chan *outcome, 1024)
	s.out = make(chan writeItem, 4096)
	s.werr = make(chan error, 1)
	if s.opts.Timing == TimingPoisson {
		s.arrivals = rng.New(s.opts.Seed, "load:arrivals")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); defer bug.Catch(); s.writer() }()

	s.src.prime()
	s.clock = NewClock()
	s.sum.Start = s.clock.Start()
	runErr := s.loop(ctx)
	s.sum.PeakHeld = s.g.peak
	close(s.out)
	wg.Wait()
	s.sum.Reasons = s.reasons.Counts(FailureStatuses...)
	s.sum.Elapsed = time.Duration(s.clock.Now()) * time.Microsecond
	select {
	case err := <-s.werr:
		if runErr == nil {
			runErr = err
		}
	default:
	}
	return s.sum, runErr
}

func (s *Session) loop(ctx context.Context) error {
	if err := s.readRoot(); err != nil {
		return s.fatal(err)
	}
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	tick := time.NewTicker(s.opts.ProgressEvery)
	defer tick.Stop()
	drainAt := int64(math.MaxInt64)
	ctxDone := ctx.Done()
	for {
		now := s.clock.Now()
		if !s.stopping && s.opts.Duration > 0 && now >= s.opts.Duration.Microseconds() {
			s.stop(fmt.Sprintf("stopped at --duration %s", s.opts.Duration))
			drainAt = now + s.opts.Drain.Microseconds()
		}
		if err := s.fireTimers(now); err != nil {
			return s.fatal(err)
		}
		if err := s.dispatch(now); err != nil {
			return s.fatal(err)
		}
		if s.inFlight == 0 && s.timers.len() == 0 && s.qDeps.len() == 0 && s.qRoots.len() == 0 && (s.exhausted || s.stopping) {
			break
		}
		next := int64(math.MaxInt64)
		if s.timers.len() > 0 && !s.stopping && !s.afterDuration(s.timers.peek()) {
			next = s.timers.peek().fire
		}
		if !s.stopping && s.opts.Duration > 0 {
			next = min(next, s.opts.Duration.Microseconds())
		}
		if s.stopping {
			next = min(next, drainAt)
		}
		if next != math.MaxInt64 {
			wake.Reset(time.Until(s.clock.At(next)))
		} else {
			wake.Reset(time.Hour)
		}
		select {
		case o := <-s.done:
			if err := s.complete(o); err != nil {
				return s.fatal(err)
			}
			// Take whatever else has finished without sleeping.
			for k := 0; k < 256; k++ {
				select {
				case o := <-s.done:
					if err := s.complete(o); err != nil {
						return s.fatal(err)
					}
					continue
				default:
				}
				break
			}
		case <-wake.C:
			if s.stopping && s.clock.Now() >= drainAt && s.inFlight > 0 {
				s.cancel(&stopCause{fmt.Sprintf("in flight when the drain timeout (%s) ended", s.opts.Drain)})
				drainAt = math.MaxInt64
			}
		case why := <-s.stopReq:
			if !s.stopping {
				s.stop(why)
				drainAt = s.clock.Now() + s.opts.Drain.Microseconds()
			}
		case <-ctxDone:
			ctxDone = nil
			if !s.stopping {
				s.stop("stopped: " + context.Cause(ctx).Error())
				drainAt = s.clock.Now() + s.opts.Drain.Microseconds()
			}
		case <-s.abortReq:
			s.cancel(&stopCause{"in flight when the session was aborted"})
			if !s.stopping {
				s.stop("aborted")
			}
			s.abortReq = nil
		case err := <-s.werr:
			s.werr <- err
			return s.fatal(err)
		case <-tick.C:
			if s.opts.Progress != nil {
				s.opts.Progress(Progress{Elapsed: time.Duration(s.clock.Now()) * time.Microsecond, Done: s.sum.Rows, Sent: s.sum.Sent + int64(s.inFlight),
					InFlight: s.inFlight, Completed: s.sum.Completed, Errors: s.sum.Failed + s.sum.Rejected + s.sum.TimedOut})
			}
		}
	}
	// Rows still waiting on dependencies that never finished.
	for n := s.g.head; n != nil; {
		next := n.next
		if n.phase != done {
			s.terminal(n, nil, trace.StatusUnfinished, "dependencies unfinished when the session stopped")
		}
		n = next
	}
	return nil
}

// fatal ends the session on an error: nothing more is issued, requests in
// flight are cancelled and collected, so no goroutine outlives Run.
func (s *Session) fatal(err error) error {
	if !s.stopping {
		s.stop("stopped by an error")
	}
	s.cancel(&stopCause{"in flight when the session failed"})
	for s.inFlight > 0 {
		<-s.done
		s.inFlight--
	}
	return err
}

// stop ends issuing: everything due or queued is written as unfinished.
func (s *Session) stop(why string) {
	s.stopping = true
	s.stopWhy = why
	s.sum.Stopped = why
	close(s.stopCh)
	notSent := "not sent: " + why
	for s.timers.len() > 0 {
		tm := s.timers.pop()
		if tm.tool {
			s.terminal(tm.n, nil, trace.StatusUnfinished, "tool step running when the session stopped: "+why)
		} else {
			s.terminal(tm.n, nil, trace.StatusUnfinished, notSent)
		}
	}
	for _, q := range []*fifo{&s.qDeps, &s.qRoots} {
		for q.len() > 0 {
			s.terminal(q.pop(), nil, trace.StatusUnfinished, notSent)
		}
	}
	s.readAhead = nil
}

// readRoot reads rows up to and including the next root to schedule,
// registering the dependents met on the way.
func (s *Session) readRoot() error {
	for !s.exhausted && !s.stopping {
		if s.opts.Limit > 0 && s.rowsRead >= s.opts.Limit {
			s.exhausted = true
			return nil
		}
		r, row, err := s.src.next()
		if err != nil {
			return err
		}
		if r == nil {
			s.exhausted = true
			return nil
		}
		s.rowsRead++
		n, err := s.g.add(r, row)
		if err != nil {
			return err
		}
		if r.SourceStatus == trace.SourceFailed {
			s.terminal(n, nil, trace.StatusSourceFailed, "")
			continue
		}
		if !n.root {
			switch {
			case n.blocked != nil:
				s.terminal(n, nil, trace.StatusDropped, fmt.Sprintf("dependency %s %s", n.blocked.req.ID, n.blocked.status))
			case n.pending == 0:
				s.ready(n)
			}
			continue
		}
		var at int64
		switch s.opts.Timing {
		case TimingTrace:
			at = s.scale(r.ArrivalUS)
		case TimingPoisson:
			if s.poissonStarted {
				s.poissonUS += s.arrivals.ExpFloat64() / s.opts.Rate * 1e6
			}
			s.poissonStarted = true
			at = int64(s.poissonUS)
		}
		s.schedule(n, at)
		if r.Kind == trace.KindTool {
			continue // a timer: keep reading up to a request to send
		}
		s.readAhead = n
		return nil
	}
	return nil
}

// scale converts a table time to session time (trace timing's speedup).
func (s *Session) scale(us int64) int64 {
	if s.opts.Timing != TimingTrace || s.opts.Speedup == 1 {
		return us
	}
	return int64(float64(us) / s.opts.Speedup)
}

// ready schedules a dependent whose dependencies all completed, the way
// blis-sim does: a tool step starts at max(last finish, own arrival) and
// lasts delay_us; an LLM request is due at max(last finish + delay_us,
// own arrival). Own arrivals and delays follow the trace's clock only
// with trace timing.
func (s *Session) ready(n *node) {
	if s.stopping {
		s.terminal(n, nil, trace.StatusUnfinished, "not sent: "+s.stopWhy)
		return
	}
	own := int64(math.MinInt64)
	if s.opts.Timing == TimingTrace && n.req.ArrivalUS != trace.Null {
		own = s.scale(n.req.ArrivalUS)
	}
	now := s.clock.Now()
	delay := s.scale(n.req.DelayUS)
	if n.req.Kind == trace.KindTool {
		start := max(n.readyAt, own, now)
		n.arrival, n.due = start, start
		n.phase = timed
		s.seq++
		s.timers.push(timer{fire: start + delay, seq: s.seq, n: n, tool: true})
		return
	}
	s.schedule(n, max(n.readyAt+delay, own, now))
}

// schedule makes n due at session time at (a root tool row is a timer).
func (s *Session) schedule(n *node, at int64) {
	n.due, n.phase = at, timed
	s.seq++
	if n.req.Kind == trace.KindTool {
		n.arrival = at
		s.timers.push(timer{fire: at + s.scale(n.req.DelayUS), seq: s.seq, n: n, tool: true})
		return
	}
	s.timers.push(timer{fire: at - s.opts.Lead.Microseconds(), seq: s.seq, n: n})
}

// fireTimers handles the timers that are due.
func (s *Session) fireTimers(now int64) error {
	for s.timers.len() > 0 && s.timers.peek().fire <= now && !s.stopping {
		if s.afterDuration(s.timers.peek()) {
			return nil // not sent: the session stops first
		}
		tm := s.timers.pop()
		n := tm.n
		if tm.tool {
			n.finished = tm.fire
			s.terminal(n, nil, trace.StatusCompleted, "")
		} else {
			n.phase = queued
			if n.root {
				s.qRoots.push(n)
			} else {
				s.qDeps.push(n)
			}
		}
		// With timed arrivals the next root is read when this one is due;
		// offline, when it has been armed (dispatch), so a closed loop
		// does not read the whole table into its queue.
		if n == s.readAhead && s.opts.Timing != TimingOffline {
			s.readAhead = nil
			if err := s.readRoot(); err != nil {
				return err
			}
		}
	}
	return nil
}

// afterDuration: tm is a request due at or after --duration.
func (s *Session) afterDuration(tm timer) bool {
	return s.opts.Duration > 0 && !tm.tool && tm.n.due >= s.opts.Duration.Microseconds()
}

// dispatch arms queued requests while slots are free: continuing
// sessions (dependents) before new roots.
func (s *Session) dispatch(now int64) error {
	for !s.stopping {
		if s.opts.Concurrency > 0 && s.inFlight >= s.opts.Concurrency {
			return nil
		}
		var n *node
		switch {
		case s.qDeps.len() > 0:
			n = s.qDeps.pop()
		case s.qRoots.len() > 0:
			n = s.qRoots.pop()
		default:
			return nil
		}
		s.arm(n, now)
		if n == s.readAhead {
			s.readAhead = nil
			if err := s.readRoot(); err != nil {
				return err
			}
			now = s.clock.Now()
			if err := s.fireTimers(now); err != nil {
				return err
			}
		}
	}
	return nil
}

// arm starts n's goroutine: it builds the request and sends it at
// max(due, now), on its own timer, so that neither building bodies nor
// reading responses delays the issuing of others.
func (s *Session) arm(n *node, now int64) {
	n.phase = inFlight
	s.inFlight++
	o := newOutcome(n)
	o.due, o.granted = n.due, now
	at := max(n.due, now)
	timeout := s.opts.ClientTimeout
	if n.req.TimeoutUS > 0 {
		timeout = time.Duration(n.req.TimeoutUS) * time.Microsecond
	}
	go s.run(o, at, timeout)
}

var bufPool = sync.Pool{New: func() any { return &reqBuf{} }}

type reqBuf struct {
	ids  []uint32
	text []byte
	body []byte
}

// run is one request's goroutine.
func (s *Session) run(o *outcome, at int64, timeout time.Duration) {
	defer func() { s.done <- o }()
	r := &o.n.req
	b := bufPool.Get().(*reqBuf)
	defer bufPool.Put(b)
	p := s.opts.Prompts
	b.ids = p.AppendIDs(b.ids[:0], r)
	b.text = b.text[:0]
	if s.target.API == Chat {
		b.text = p.AppendWords(b.text, b.ids)
	}
	b.body = appendBody(b.body[:0], s.target.API, s.model, b.ids, b.text, max(int(r.OutputTokens), 1), s.target.Ext)
	if !wait.Until(s.clock.At(at), s.stopCh) {
		// stop wrote stopWhy before closing stopCh.
		o.status, o.reason = trace.StatusUnfinished, "not sent: "+s.stopWhy
		return
	}
	ctx := s.flightCtx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, time.Now().Add(timeout), errClientTimeout)
		defer cancel()
	}
	send(ctx, s.hc, s.target, s.clock, b.body, o, s.opts.Chunks != nil, s.opts.MaxEvent)
	if o.status == trace.StatusTimedOut {
		o.end = o.sent + timeout.Microseconds()
		o.reason = fmt.Sprintf("client timeout after %d µs", timeout.Microseconds()) // blis-sim's words
	}
}

// complete records a request's outcome and releases its dependents.
func (s *Session) complete(o *outcome) error {
	s.inFlight--
	n := o.n
	if o.sent != trace.Null {
		s.sum.Sent++
		s.sum.LastSent = max(s.sum.LastSent, o.sent)
		if s.opts.Timing == TimingOffline {
			_ = s.sum.IssueLag.RecordValue(max(o.sent-o.granted, 0))
		} else {
			_ = s.sum.IssueLag.RecordValue(max(o.sent-o.due, 0))
			if s.opts.Concurrency > 0 {
				_ = s.sum.SlotWait.RecordValue(max(o.granted-o.due, 0))
			}
		}
		n.arrival = o.sent
	} else {
		n.arrival = n.due
	}
	switch o.status {
	case trace.StatusCompleted:
		n.finished = o.lastTok
		if n.finished == trace.Null {
			n.finished = o.end
		}
	default:
		n.finished = o.end
	}
	s.terminal(n, o, o.status, o.reason)
	return nil
}

// terminal writes n's result and releases or drops its dependents.
func (s *Session) terminal(n *node, o *outcome, status, reason string) {
	if n.phase == done {
		return
	}
	n.status, n.reason = status, reason
	s.g.finish(n)
	s.record(n, o)
	s.work = append(s.work[:0], n)
	for len(s.work) > 0 {
		p := s.work[len(s.work)-1]
		s.work = s.work[:len(s.work)-1]
		for _, c := range p.children {
			if c.phase == done {
				continue
			}
			c.pending--
			switch p.status {
			case trace.StatusCompleted:
				c.readyAt = max(c.readyAt, p.finished)
				if c.pending == 0 {
					s.ready(c)
				}
			case trace.StatusUnfinished:
				// written when the session ends
			default:
				c.status, c.reason = trace.StatusDropped, fmt.Sprintf("dependency %s %s", p.req.ID, p.status)
				s.g.finish(c)
				s.record(c, nil)
				s.work = append(s.work, c)
			}
		}
		p.children = nil
	}
}

// fifo is a queue of nodes.
type fifo struct {
	s    []*node
	head int
}

func (q *fifo) len() int { return len(q.s) - q.head }
func (q *fifo) push(n *node) {
	if q.head > 0 && q.head == len(q.s) {
		q.s, q.head = q.s[:0], 0
	}
	q.s = append(q.s, n)
}
func (q *fifo) pop() *node {
	n := q.s[q.head]
	q.s[q.head] = nil
	q.head++
	return n
}

func jsonString(s string) []byte { return appendJSONString(nil, []byte(s)) }
