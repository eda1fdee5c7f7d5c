package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/blis-sim/blis/lib/trace"
)

// Clock is a session's monotonic clock: microseconds since its start.
// time.Since reads Go's monotonic clock, so wall-clock steps (NTP) do not
// move it.
type Clock struct{ start time.Time }

// NewClock starts a clock now.
func NewClock() Clock { return Clock{start: time.Now()} }

// Now returns the microseconds elapsed since the clock started.
func (c Clock) Now() int64 { return int64(time.Since(c.start) / time.Microsecond) }

// At returns the instant t microseconds after the start.
func (c Clock) At(t int64) time.Time { return c.start.Add(time.Duration(t) * time.Microsecond) }

// Start is the wall-clock time of t = 0.
func (c Clock) Start() time.Time { return c.start }

// Target is the server and how to talk to it.
type Target struct {
	// URL is the API base, e.g. http://localhost:8000/v1.
	URL    string
	API    API
	Model  string // sent as "model" in every request
	APIKey string // sent as a bearer token when set
	Ext    Extensions
	// Header holds extra request headers (may be nil).
	Header http.Header
}

// Endpoint is the URL requests are posted to.
func (t *Target) Endpoint() string { return strings.TrimRight(t.URL, "/") + t.API.Path() }

// NewHTTPClient returns a client for a session with up to conns requests in
// flight: that many idle connections are kept for reuse (a new TCP
// connection adds a handshake to the TTFT of its request; warm-up requests
// open them before the session), compression is off (an
// event stream must not be buffered by a gzip reader), and there is no
// overall timeout (streams last as long as generation does; client
// timeouts are per request).
func NewHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   max(conns, 16),
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 0,
		ForceAttemptHTTP2:     false,
	}
	return &http.Client{Transport: tr}
}

// outcome is what happened to one request, filled by the goroutine that
// ran it. Times are on the session clock; trace.Null when not reached.
type outcome struct {
	n        *node
	due      int64 // when the plan (or its dependencies) made it due
	granted  int64 // when it was given a slot and armed (>= due)
	sent     int64 // the HTTP request started (the request's arrival)
	firstTok int64
	lastTok  int64
	end      int64 // stream closed
	chunks   int32 // events that carried generated text
	usage    usage
	hasUsage bool
	code     int // HTTP status, 0 when none came back
	status   string
	reason   string
	times    []int64 // arrival of each text chunk, with --chunks
	// sawCompletion: some event had choices or usage (the probe checks
	// the server speaks OpenAI's format).
	sawCompletion bool
}

func newOutcome(n *node) *outcome {
	return &outcome{n: n, due: trace.Null, granted: trace.Null, sent: trace.Null, firstTok: trace.Null, lastTok: trace.Null, end: trace.Null}
}

// causes of a request's context ending early.
var (
	errClientTimeout = errors.New("client timeout")
)

// stopCause cancels requests when a session stops: the reason becomes the
// request's drop_reason, its status unfinished.
type stopCause struct{ reason string }

func (s *stopCause) Error() string { return s.reason }

const maxErrorBody = 64 << 10

// send runs one request on c and fills o. It never panics on what a server
// sends: every failure becomes o.status and o.reason.
func send(ctx context.Context, hc *http.Client, t *Target, clock Clock, body []byte, o *outcome, keepTimes bool, maxEvent int) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Endpoint(), bytes.NewReader(body))
	if err != nil {
		o.status, o.reason = trace.StatusFailed, "building the request: "+err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	for k, v := range t.Header {
		req.Header[k] = v
	}
	o.sent = clock.Now()
	resp, err := hc.Do(req)
	if err != nil {
		o.end = clock.Now()
		o.fail(ctx, "connection: ", err)
		return
	}
	defer resp.Body.Close()
	o.code = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		o.end = clock.Now()
		o.status = statusForHTTP(resp.StatusCode)
		o.reason = fmt.Sprintf("HTTP %d", resp.StatusCode)
		if msg := errorText(b); msg != "" {
			o.reason += ": " + msg
		}
		return
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		o.end = clock.Now()
		o.status = trace.StatusFailed
		o.reason = fmt.Sprintf("the response is %q, not an event stream (does the server stream?): %s", resp.Header.Get("Content-Type"), oneLine(string(b), 120))
		return
	}
	readStream(ctx, resp.Body, clock, o, keepTimes, maxEvent)
	if o.status == trace.StatusCompleted {
		// Read the end of the chunked body after [DONE], or the connection
		// cannot be reused (and the next request on it would pay for a
		// new one); a server that keeps the stream open gets a second.
		stop := time.AfterFunc(time.Second, cancel)
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		stop.Stop()
	}
}

// readStream consumes the event stream of a completion.
func readStream(ctx context.Context, body io.Reader, clock Clock, o *outcome, keepTimes bool, maxEvent int) {
	sse := NewSSE(body, maxEvent)
	finished := false
	for {
		ev, err := sse.Next()
		now := clock.Now()
		if err != nil {
			o.end = now
			if err == io.EOF {
				if finished {
					o.status = trace.StatusCompleted // no [DONE], but the choice finished
					return
				}
				o.status, o.reason = trace.StatusFailed, fmt.Sprintf("stream ended without [DONE] after %d chunks", o.chunks)
				return
			}
			o.fail(ctx, "stream: ", err)
			return
		}
		if bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
			o.end = now
			o.status = trace.StatusCompleted
			return
		}
		d, err := decodeChunk(ev.Data)
		if err != nil {
			o.end = now
			o.status, o.reason = trace.StatusFailed, err.Error()
			return
		}
		if d.errMsg != "" || ev.Type == "error" {
			o.end = now
			msg := d.errMsg
			if msg == "" {
				msg = oneLine(string(ev.Data), 300)
			}
			o.status, o.reason = trace.StatusFailed, "server error in the stream: "+msg
			return
		}
		o.sawCompletion = o.sawCompletion || d.completion
		if d.tokens {
			if o.firstTok == trace.Null {
				o.firstTok = now
			}
			o.lastTok = now
			o.chunks++
			if keepTimes {
				o.times = append(o.times, now)
			}
		}
		if d.finished {
			finished = true
		}
		if d.usage != nil {
			o.usage, o.hasUsage = *d.usage, true
		}
	}
}

// fail classifies an error that ended a request early: the client's own
// timeout, a stopped session, or a failure of the connection or server.
func (o *outcome) fail(ctx context.Context, what string, err error) {
	cause := context.Cause(ctx)
	var sc *stopCause
	switch {
	case errors.Is(cause, errClientTimeout):
		o.status, o.reason = trace.StatusTimedOut, ""
	case errors.As(cause, &sc):
		o.status, o.reason = trace.StatusUnfinished, sc.reason
	default:
		o.status, o.reason = trace.StatusFailed, what+describeNetErr(err)
	}
}

// describeNetErr names common connection failures plainly.
func describeNetErr(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the server"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "the server closed the connection"
	}
	return oneLine(err.Error(), 300)
}

// statusForHTTP maps an HTTP error status to a result status: the server
// refusing work it could do later (429 Too Many Requests, 503 Service
// Unavailable) is a rejection, as admission control is in the simulator;
// anything else is a failure.
func statusForHTTP(code int) string {
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		return trace.StatusRejected
	}
	return trace.StatusFailed
}
