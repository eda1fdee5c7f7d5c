package load

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// writeItem is one result and, with --chunks, its events.
type writeItem struct {
	res    trace.Result
	events []trace.Chunk
}

// writer encodes results off the issuing goroutine.
func (s *Session) writer() {
	var err error
	for it := range s.out {
		if err != nil {
			continue // keep draining so the session never blocks on us
		}
		if err = s.opts.Results.Write(&it.res); err == nil && s.opts.Chunks != nil {
			for i := range it.events {
				if err = s.opts.Chunks.Write(&it.events[i]); err != nil {
					break
				}
			}
		}
		if err != nil {
			s.werr <- err
		}
	}
}

// record turns a finished row into its results row (docs/load.md lists
// what each column holds) and counts it.
func (s *Session) record(n *node, o *outcome) {
	res := trace.NewResult(n.req)
	res.Status, res.DropReason = n.status, n.reason
	res.Deployment = s.target.Model
	if n.arrival != trace.Null {
		res.ArrivalUS = n.arrival
	}
	timeout := s.opts.ClientTimeout.Microseconds()
	if n.req.TimeoutUS > 0 {
		timeout = n.req.TimeoutUS
	}
	if n.req.Kind == trace.KindLLM && timeout > 0 {
		res.TimeoutUS = timeout
	}
	// The run's own measurements replace the ones read from the table:
	// read back as requests, this table is a recorded run.
	res.RecordedTTFTUS, res.RecordedE2EUS, res.RecordedITLUS = trace.Null, trace.Null, trace.Null
	sum := &s.sum
	sum.Rows++
	switch n.status {
	case trace.StatusCompleted:
		sum.Completed++
	case trace.StatusFailed:
		sum.Failed++
	case trace.StatusRejected:
		sum.Rejected++
	case trace.StatusTimedOut:
		sum.TimedOut++
	case trace.StatusDropped:
		sum.Dropped++
	case trace.StatusUnfinished:
		sum.Unfinished++
	case trace.StatusSourceFailed:
		sum.SourceFailed++
	}
	if n.req.Kind == trace.KindTool && n.status == trace.StatusCompleted {
		res.FinishedUS = n.finished
		res.E2EUS = n.finished - n.arrival
	}
	var events []trace.Chunk
	if o != nil && o.sent != trace.Null {
		s.fillMeasured(&res, n, o, timeout)
		if s.opts.Chunks != nil {
			events = chunkEvents(n, o)
		}
	} else if s.opts.Chunks != nil && n.due != trace.Null && n.req.Kind == trace.KindLLM {
		events = []trace.Chunk{{RequestID: n.req.ID, Event: trace.EventDue, TimeUS: n.due},
			{RequestID: n.req.ID, Event: trace.EventError, TimeUS: n.due, Detail: n.status + ": " + n.reason}}
	}
	switch n.status {
	case trace.StatusFailed, trace.StatusRejected, trace.StatusTimedOut, trace.StatusDropped:
		code := 0
		if o != nil {
			code = o.code
		}
		s.reasons.AddClass(n.status, FailureKind(res.DropReason, code), res.DropReason, 1)
	}
	s.out <- writeItem{res: res, events: events}
}

// fillMeasured fills the columns a request that was sent measured.
func (s *Session) fillMeasured(res *trace.Result, n *node, o *outcome, timeout int64) {
	sum := &s.sum
	generated := int64(o.chunks)
	if o.hasUsage {
		sum.Usage++
		generated = o.usage.CompletionTokens
		if o.usage.PromptTokens > 0 {
			if o.usage.PromptTokens != int64(n.req.InputTokens) && o.status == trace.StatusCompleted {
				sum.InputDiffers++
			}
			res.InputTokens = int32(min(o.usage.PromptTokens, 1<<31-1))
		}
		if d := o.usage.PromptTokensDetails; d != nil {
			res.CachedTokens = int32(min(d.CachedTokens, 1<<31-1))
		}
	}
	res.GeneratedTokens = int32(min(generated, 1<<31-1))
	res.FirstTokenUS = o.firstTok
	if o.firstTok != trace.Null {
		res.TTFTUS = o.firstTok - o.sent
		res.RecordedTTFTUS = res.TTFTUS
	}
	switch o.status {
	case trace.StatusCompleted:
		res.FinishedUS = n.finished
		res.E2EUS = n.finished - o.sent
		res.RecordedE2EUS = res.E2EUS
		if res.GeneratedTokens > 1 && o.firstTok != trace.Null {
			res.TPOTUS = (o.lastTok - o.firstTok) / int64(res.GeneratedTokens-1)
			res.RecordedITLUS = res.TPOTUS
		}
		if res.GeneratedTokens != res.OutputTokens {
			sum.OutputDiffers++
			res.OutputTokens = res.GeneratedTokens
		}
		sum.Tokens += int64(res.GeneratedTokens)
	case trace.StatusTimedOut:
		res.FinishedUS = o.sent + timeout
		res.E2EUS = timeout
	case trace.StatusFailed, trace.StatusRejected:
		if o.end != trace.Null {
			res.FinishedUS = o.end
			res.E2EUS = o.end - o.sent
		}
		// Read back as requests, a failed request failed in its source.
		res.SourceStatus = trace.SourceFailed
	}
}

// chunkEvents is a sent request's event log.
func chunkEvents(n *node, o *outcome) []trace.Chunk {
	id := n.req.ID
	ev := make([]trace.Chunk, 0, len(o.times)+3)
	ev = append(ev, trace.Chunk{RequestID: id, Event: trace.EventDue, TimeUS: o.due},
		trace.Chunk{RequestID: id, Event: trace.EventSent, TimeUS: o.sent})
	for i, t := range o.times {
		ev = append(ev, trace.Chunk{RequestID: id, Event: trace.EventChunk, TimeUS: t, Chunk: int32(i + 1)})
	}
	end := o.end
	if end == trace.Null {
		end = o.sent
	}
	if o.status == trace.StatusCompleted {
		ev = append(ev, trace.Chunk{RequestID: id, Event: trace.EventDone, TimeUS: end})
	} else {
		d := o.status
		if o.reason != "" {
			d += ": " + o.reason
		}
		ev = append(ev, trace.Chunk{RequestID: id, Event: trace.EventError, TimeUS: end, Detail: d})
	}
	return ev
}

// FailureStatuses are the statuses whose reasons a session counts, in the
// order its summary lists them.
var FailureStatuses = []string{trace.StatusFailed, trace.StatusRejected, trace.StatusTimedOut, trace.StatusDropped}

// FailureKind names the kind of a failure for counting, without what makes
// each message its own (a chunk count, a port, a request id): the HTTP
// status of an error answer ("HTTP 503"), the class of a connection or
// stream failure ("connection: connection refused", "stream ended without
// [DONE]"), or the drop_reason's class (trace.ReasonClass).
func FailureKind(reason string, httpStatus int) string {
	switch {
	case httpStatus != 0 && httpStatus != http.StatusOK:
		return fmt.Sprintf("HTTP %d", httpStatus)
	case strings.HasPrefix(reason, "stream ended without [DONE]"):
		return "stream ended without [DONE]"
	case strings.HasPrefix(reason, "server error in the stream"):
		return "server error in the stream"
	case strings.HasPrefix(reason, "the response is "):
		return "the response is not an event stream"
	case strings.HasPrefix(reason, "building the request"):
		return "building the request"
	case strings.HasPrefix(reason, "connection: "), strings.HasPrefix(reason, "stream: "), strings.HasPrefix(reason, "not sent: "):
		return trace.NumbersToN(reason)
	}
	return trace.ReasonClass(reason)
}
