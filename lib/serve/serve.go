// Package serve puts the simulator behind an OpenAI-compatible HTTP
// endpoint, in real time (blis-serve): each request is injected into a
// simulated cluster when it arrives, and its tokens are streamed back
// when the simulation produces them. blis-load against blis-serve then
// reproduces what blis-sim predicts for the same arrivals (a closed loop
// check of both tools), and real routers can be put in front of simulated
// replicas.
//
// One goroutine owns the cluster (the core is single-threaded and does no
// I/O). Handlers send it arrivals and cancellations over channels; it
// runs the core up to the simulated now (wall time since Start × speedup),
// wakes at the next event or token time, and publishes each request's
// progress to its handler, which writes the HTTP response: a slow client
// never delays the simulation.
package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/roofline"
	"github.com/blis-sim/blis/lib/sim"
	"github.com/blis-sim/blis/lib/trace"
)

// Config sets up a Server.
type Config struct {
	// Setup is the simulated cluster: its prepared config, latency models
	// and policies (lib/sim, as blis-sim runs them).
	Setup *sim.Setup
	// Speedup runs simulated time this many times faster than the wall
	// clock (default 1).
	Speedup float64
	// BlockSize is the tokens per derived prefix hash (default 16, as
	// blis-load's --block-size).
	BlockSize int
	// DefaultMaxTokens is the output length of a request without
	// max_tokens (default 256).
	DefaultMaxTokens int64
	// Results, when set, receives every result (on the cluster's
	// goroutine, in the order requests end): the results table.
	Results cluster.Sink
	// CheckInvariants asserts the engine's invariants while serving.
	CheckInvariants bool
	// MaxBody bounds a request body (default 64 MiB).
	MaxBody int64
}

// Server is a running simulated cluster with its HTTP handler.
type Server struct {
	cfg     Config
	c       *cluster.Cluster
	start   time.Time
	speedup float64
	served  []string          // model names, as configured, in config order
	keys    map[string]string // model key -> served name
	alpha2  []float64         // per replica: µs per streamed token (the latency model's α₂)

	arrivals chan *call
	cancels  chan *call
	stopping chan struct{} // closed by Close: no more arrivals
	stopOnce sync.Once
	done     chan struct{} // closed when the loop has ended
	finish   chan time.Duration
	abort    chan struct{}
	abrtOnce sync.Once

	// owned by the loop
	live    []*call
	byID    map[string]*call
	seq     int64
	lastArr int64
	sum     cluster.Summary
	err     error
	outcome Outcome

	mux *http.ServeMux

	idMu sync.Mutex
	idN  int64
}

// Outcome is what Close reports.
type Outcome struct {
	Summary cluster.Summary
	// Drained counts requests in flight at Close that finished within the
	// drain; Unfinished those the drain cut (written as unfinished).
	Drained, Unfinished int
}

// New builds the cluster; Start starts its clock.
func New(cfg Config) (*Server, error) {
	if cfg.Speedup <= 0 {
		cfg.Speedup = 1
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 16
	}
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = 256
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 20
	}
	if cfg.Setup.Cfg.Horizon > 0 {
		return nil, fmt.Errorf("the cluster config sets horizon: blis-serve runs until it is stopped; remove the key")
	}
	s := &Server{cfg: cfg, speedup: cfg.Speedup, keys: map[string]string{},
		arrivals: make(chan *call, 1024), cancels: make(chan *call, 1024),
		stopping: make(chan struct{}), done: make(chan struct{}), finish: make(chan time.Duration, 1), abort: make(chan struct{}),
		byID: map[string]*call{}}
	c, err := cfg.Setup.Cluster(sinkFunc(s.result),
		cluster.Options{PrefixBlockSize: cfg.BlockSize, Streamed: true, CheckInvariants: cfg.CheckInvariants, Path: "blis-serve"})
	if err != nil {
		return nil, err
	}
	s.c = c
	s.alpha2 = make([]float64, len(c.Replicas()))
	for i, d := range c.Deployments() {
		for _, r := range d.Replicas {
			if int(r) < len(s.alpha2) {
				s.alpha2[r] = cfg.Setup.Models[i].Alpha().PerOutputToken
			}
		}
	}
	for _, d := range c.Deployments() {
		k := roofline.ModelKey(d.Model)
		if _, ok := s.keys[k]; !ok {
			s.keys[k] = d.Model
			s.served = append(s.served, d.Model)
		}
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	s.mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// The catch-all takes every method of the paths above too (Go's
		// mux would answer 405 without it): a path served with another
		// method is a 405 with Allow, as HTTP asks; others a 404.
		if allow, ok := endpoints[r.URL.Path]; ok {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowedError", fmt.Sprintf("%s %s: method not allowed (%s only)", r.Method, r.URL.Path, allow))
			return
		}
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("%s %s: blis-serve serves POST /v1/completions, POST /v1/chat/completions, GET /v1/models and GET /health", r.Method, r.URL.Path))
	})
	return s, nil
}

// endpoints are the paths served and the methods each allows (GET
// includes HEAD, as Go's mux serves it).
var endpoints = map[string]string{
	"/v1/completions":      "POST",
	"/v1/chat/completions": "POST",
	"/v1/models":           "GET, HEAD",
	"/health":              "GET, HEAD",
}

// Handler serves the OpenAI endpoints.
func (s *Server) Handler() http.Handler { return s.mux }

// Models returns the models served (the deployments' models).
func (s *Server) Models() []string { return s.served }

// Start starts the simulated clock (t = 0 now) and the cluster's goroutine.
func (s *Server) Start() {
	s.start = time.Now()
	go s.loop()
}

// Done is closed when the cluster's goroutine has ended: after Close, or
// at once when the simulation failed (an invariant, a results sink that
// failed; Close then returns the error).
func (s *Server) Done() <-chan struct{} { return s.done }

// StartTime is the wall-clock time of simulated t = 0.
func (s *Server) StartTime() time.Time { return s.start }

// Close stops taking requests (new ones get 503), lets the requests in
// flight run for up to drain (in real time), ends the rest as unfinished
// and finishes the run. Safe to call once.
func (s *Server) Close(drain time.Duration) (Outcome, error) {
	s.stopOnce.Do(func() {
		close(s.stopping)
		s.finish <- drain
	})
	<-s.done
	return s.outcome, s.err
}

// Abort cuts a Close's drain short: the requests still in flight are
// ended as unfinished at once.
func (s *Server) Abort() { s.abrtOnce.Do(func() { close(s.abort) }) }

// simNow is the simulated time now, µs.
func (s *Server) simNow() int64 { return s.simAt(time.Now()) }

func (s *Server) simAt(t time.Time) int64 {
	return int64(float64(t.Sub(s.start)/time.Nanosecond) * s.speedup / 1e3)
}

// wallAt is the wall-clock time of simulated t.
func (s *Server) wallAt(t int64) time.Time {
	return s.start.Add(time.Duration(float64(t) * 1e3 / s.speedup))
}

type sinkFunc func(*trace.Result) error

func (f sinkFunc) Write(r *trace.Result) error { return f(r) }

// call is one request: the handler's and the loop's shared record.
type call struct {
	id        string
	p         *parsed
	stamp     time.Time // the handler received it
	created   int64     // unix seconds, for the chunks
	modelJSON []byte
	notify    chan struct{} // cap 1: the loop published something

	mu  sync.Mutex
	pub published

	// owned by the loop
	st        *request.State // nil once final (the engine reuses states)
	final     bool
	res       trace.Result
	cancelled bool
	firstTok  int64
	finished  int64
	a2        float64 // α₂ of its replica
	// Tokens produced but maybe not yet visible: token k (1-based) of a
	// batch produced at step end `at` shows at at + α₂·k, as the engine
	// stamps the first and last tokens.
	batches []batch
	seen    int32 // tokens in batches or shown
	shown   int32 // tokens visible
}

type batch struct {
	upto int32 // tokens 1..upto
	at   int64 // the step end that produced them
}

func alphaTokens(a2 float64, n int32) int64 {
	if a2 == 0 {
		return 0
	}
	return int64(a2*float64(n) + 0.5)
}

// produced records that the first n tokens exist at step end at.
func (c *call) produced(n int32, at int64) {
	if n > c.seen {
		c.batches = append(c.batches, batch{n, at})
		c.seen = n
	}
}

// release advances shown to the tokens visible at now (at most limit).
func (c *call) release(now int64, limit int32) {
	for len(c.batches) > 0 {
		b := c.batches[0]
		for c.shown < min(b.upto, limit) && b.at+alphaTokens(c.a2, c.shown+1) <= now {
			c.shown++
		}
		if c.shown < b.upto {
			return
		}
		c.batches = c.batches[1:]
	}
}

// nextToken is when the next token held back shows (MaxInt64: none).
func (c *call) nextToken() int64 {
	if len(c.batches) == 0 {
		return math.MaxInt64
	}
	return c.batches[0].at + alphaTokens(c.a2, c.shown+1)
}

// published is what the loop tells the handler.
type published struct {
	visible int32 // output tokens the client may see
	done    bool  // the request ended (res holds how)
	res     trace.Result
	refused string // not admitted (server stopping)
}

func (c *call) publish(p published) {
	c.mu.Lock()
	changed := p.visible != c.pub.visible || p.done != c.pub.done || p.refused != c.pub.refused
	c.pub = p
	c.mu.Unlock()
	if changed {
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
}

func (c *call) snapshot() published {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pub
}

// loop owns the cluster.
func (s *Server) loop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var drainEnd <-chan time.Time
	draining, aborted := false, false
	abortCh := s.abort
	for {
		now := s.simNow()
		if !s.run(now) {
			s.end()
			return
		}
		if draining && len(s.live) == 0 {
			s.end()
			return
		}
		if next := s.nextWake(now); next < math.MaxInt64 {
			timer.Reset(time.Until(s.wallAt(max(next, now+1))))
		}
		select {
		case a := <-s.arrivals:
			s.arrive(a)
			if s.err != nil {
				s.end()
				return
			}
		case x := <-s.cancels:
			s.cancel(x)
		case <-timer.C:
		case d := <-s.finish:
			draining = true
			if aborted {
				s.end()
				return
			}
			drainEnd = time.After(d)
		case <-drainEnd:
			s.end()
			return
		case <-abortCh:
			if draining {
				s.end()
				return
			}
			abortCh, aborted = nil, true
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// run processes events up to now and publishes progress; false when the
// cluster failed.
func (s *Server) run(now int64) bool {
	for s.c.RunUntil(now) == cluster.NeedInput {
	}
	if err := s.c.Err(); err != nil {
		s.err = err
		return false
	}
	s.update(now)
	return true
}

// nextWake is the next simulated time something happens: an event, or a
// token already computed whose time has not come (the engine stamps first
// and last tokens after the per-token overhead α₂).
func (s *Server) nextWake(now int64) int64 {
	next := s.c.NextEventUS()
	for _, c := range s.live {
		for _, t := range [3]int64{c.firstTok, c.finished, c.nextToken()} {
			if t != trace.Null && t > now && t < next {
				next = t
			}
		}
	}
	return next
}

// arrive injects a request at the simulated time its handler received it
// (never before the cluster's clock).
func (s *Server) arrive(a *call) {
	select {
	case <-s.stopping:
		a.publish(published{refused: "blis-serve is shutting down"})
		return
	default:
	}
	// Strictly after the events already processed and the previous
	// arrival: the results table (in the order requests end) then replays
	// in blis-sim as it was served, ties and all.
	t := max(s.simAt(a.stamp), s.c.Now()+1, s.lastArr+1)
	s.lastArr = t
	s.seq++
	r := trace.NewRequest(a.id)
	r.ArrivalUS = t
	r.InputTokens, r.OutputTokens = a.p.input, a.p.output
	r.PrefixHashes = a.p.hashes
	r.Model = a.p.model
	r.Streaming = a.p.stream
	a.firstTok, a.finished = trace.Null, trace.Null
	s.byID[a.id] = a
	s.live = append(s.live, a)
	s.c.Advance(t)
	if err := s.c.Inject(&r, s.seq); err != nil {
		s.err = err
		return
	}
	if !a.final {
		a.st = s.c.Request(a.id)
		if a.cancelled {
			// Its client went away before the request reached the cluster.
			s.c.Cancel(a.id, t)
		}
	}
}

// cancel ends a request whose client went away.
func (s *Server) cancel(x *call) {
	if x.final {
		return
	}
	x.cancelled = true
	if x.st != nil {
		s.c.Cancel(x.id, s.simNow())
	}
}

// result is the cluster's sink: a request reached its final state.
func (s *Server) result(r *trace.Result) error {
	c := s.byID[r.ID]
	if c != nil {
		c.final, c.st = true, nil
		if c.cancelled && r.Status == trace.StatusTimedOut {
			r.DropReason = fmt.Sprintf("client disconnected after %d µs", r.FinishedUS-r.ArrivalUS)
		}
		c.res = *r
		c.res.Request.PrefixHashes = nil
		c.firstTok, c.finished = r.FirstTokenUS, r.FinishedUS
		if i := r.InstanceID; i >= 0 && int(i) < len(s.alpha2) {
			c.a2 = s.alpha2[i]
		}
		if r.Status == trace.StatusCompleted && r.GeneratedTokens > 1 {
			// Produced by the last step, which ended α₂·G before finished.
			c.produced(r.GeneratedTokens-1, r.FinishedUS-alphaTokens(c.a2, r.GeneratedTokens))
		}
		delete(s.byID, r.ID)
	}
	if s.cfg.Results != nil {
		return s.cfg.Results.Write(r)
	}
	return nil
}

// update publishes every request's visible tokens at now.
func (s *Server) update(now int64) {
	k := 0
	at := s.c.Now() // the last event processed: the step end that produced new tokens
	for _, c := range s.live {
		if st := c.st; st != nil {
			c.firstTok = st.FirstTok
			n := st.Generated
			if st.Replica >= 0 && (st.Phase == request.Running || st.Phase == request.Waiting) {
				n = s.c.Replicas()[st.Replica].Sched.Progress(st)
			}
			if st.Replica >= 0 && int(st.Replica) < len(s.alpha2) {
				c.a2 = s.alpha2[st.Replica]
			}
			c.produced(n, at)
		}
		var p published
		switch {
		case c.final && c.res.Status != trace.StatusCompleted:
			p = published{visible: c.pub.visible, done: true, res: c.res}
		case c.final && now >= c.finished:
			p = published{visible: c.res.GeneratedTokens, done: true, res: c.res}
		case c.firstTok != trace.Null && now >= c.firstTok:
			// The last token shows at finished (after the per-token
			// overhead); the others at their step's end plus theirs.
			limit := int32(math.MaxInt32)
			if c.final {
				limit = c.res.GeneratedTokens - 1
			}
			c.release(now, limit)
			p = published{visible: max(c.shown, 1)}
		}
		c.publish(p)
		if !p.done {
			s.live[k] = c
			k++
		}
	}
	clear(s.live[k:])
	s.live = s.live[:k]
}

// end finishes the run: requests still in flight are written unfinished.
func (s *Server) end() {
	inflight := len(s.live)
	if s.err == nil {
		s.sum, s.err = s.c.Finish()
	}
	for _, c := range s.live {
		if c.final {
			c.publish(published{visible: c.res.GeneratedTokens, done: true, res: c.res})
		} else {
			c.publish(published{refused: "blis-serve stopped before the request ended"})
		}
	}
	s.outcome.Summary = s.sum
	s.outcome.Unfinished = len(s.live)
	s.outcome.Drained = inflight - len(s.live)
	s.live = nil
}

// ---- HTTP side

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(errorJSON(code, typ, msg))
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range s.served {
		list.Data = append(list.Data, model{m, "model", s.start.Unix(), "blis-serve"})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(list)
}

func (s *Server) complete(w http.ResponseWriter, hr *http.Request, chat bool) {
	stamp := time.Now()
	data, err := io.ReadAll(http.MaxBytesReader(w, hr.Body, s.cfg.MaxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "request body: "+err.Error())
		return
	}
	p, err := parse(data, chat, s.cfg.BlockSize, s.cfg.DefaultMaxTokens)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	if _, ok := s.keys[roofline.ModelKey(p.model)]; !ok {
		writeError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist. Served: %s", p.model, strings.Join(s.served, ", ")))
		return
	}
	c := &call{p: p, stamp: stamp, notify: make(chan struct{}, 1)}
	c.modelJSON, _ = json.Marshal(p.model)
	c.created = stamp.Unix()
	c.id = s.nextID(chat)
	select {
	case s.arrivals <- c:
	case <-s.stopping:
		writeError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "blis-serve is shutting down")
		return
	case <-hr.Context().Done():
		return
	}
	if p.stream {
		s.stream(w, hr.Context(), c)
	} else {
		s.whole(w, hr.Context(), c)
	}
}

// nextID names requests in the order handlers see them (cmpl-1, …).
func (s *Server) nextID(chat bool) string {
	s.idMu.Lock()
	s.idN++
	n := s.idN
	s.idMu.Unlock()
	if chat {
		return "chatcmpl-" + strconv.FormatInt(n, 10)
	}
	return "cmpl-" + strconv.FormatInt(n, 10)
}

// failure maps a request that did not complete to an HTTP status.
func failure(p published) (int, string, string) {
	if p.refused != "" {
		return http.StatusServiceUnavailable, "ServiceUnavailableError", p.refused
	}
	r := p.res
	msg := r.Status
	if r.DropReason != "" {
		msg += ": " + r.DropReason
	}
	switch r.Status {
	case trace.StatusRejected:
		return http.StatusTooManyRequests, "RateLimitError", msg
	case trace.StatusDropped:
		return http.StatusBadRequest, "BadRequestError", msg
	case trace.StatusTimedOut:
		return http.StatusRequestTimeout, "TimeoutError", msg
	}
	return http.StatusServiceUnavailable, "ServiceUnavailableError", msg
}

// wait blocks for the next publication; false when the client went away
// (the request is then cancelled in the engine).
func (s *Server) wait(ctx context.Context, c *call) bool {
	select {
	case <-c.notify:
		return true
	case <-ctx.Done():
		s.sendCancel(c)
		return false
	case <-s.done:
		select {
		case <-c.notify:
			return true
		default:
		}
		// The loop ended without seeing this request, or said its last.
		c.mu.Lock()
		if !c.pub.done && c.pub.refused == "" {
			c.pub.refused = "blis-serve stopped before the request ended"
		}
		c.mu.Unlock()
		return true
	}
}

func (s *Server) sendCancel(c *call) {
	select {
	case s.cancels <- c:
	case <-s.done:
	}
}

func (s *Server) whole(w http.ResponseWriter, ctx context.Context, c *call) {
	for s.wait(ctx, c) {
		p := c.snapshot()
		if p.refused != "" || p.done && p.res.Status != trace.StatusCompleted {
			code, typ, msg := failure(p)
			writeError(w, code, typ, msg)
			return
		}
		if p.done {
			w.Header().Set("Content-Type", "application/json")
			w.Write(c.fullResponse(p.res.GeneratedTokens, p.res.CachedTokens))
			return
		}
	}
}

func (s *Server) stream(w http.ResponseWriter, ctx context.Context, c *call) {
	fl, _ := w.(http.Flusher)
	var sent int32
	started := false
	var buf []byte
	for s.wait(ctx, c) {
		p := c.snapshot()
		if !started && (p.refused != "" || p.done && p.res.Status != trace.StatusCompleted && p.visible == 0) {
			code, typ, msg := failure(p)
			writeError(w, code, typ, msg)
			return
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		buf = buf[:0]
		completed := p.done && p.res.Status == trace.StatusCompleted
		for ; sent < p.visible; sent++ {
			last := completed && sent == p.visible-1
			var usage []byte
			if last && !c.p.usage {
				usage = appendUsage(nil, c.p.input, p.res.GeneratedTokens, p.res.CachedTokens)
			}
			buf = c.appendTokenChunk(buf, sent, last, usage)
		}
		if p.done || p.refused != "" {
			if completed {
				if c.p.usage {
					buf = c.appendUsageChunk(buf, appendUsage(nil, c.p.input, p.res.GeneratedTokens, p.res.CachedTokens))
				}
				buf = append(buf, "data: [DONE]\n\n"...)
			} else {
				_, _, msg := failure(p)
				b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "ServiceUnavailableError", "code": 503}})
				buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
			}
		}
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				if !p.done {
					s.sendCancel(c)
				}
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if p.done || p.refused != "" {
			return
		}
	}
}
