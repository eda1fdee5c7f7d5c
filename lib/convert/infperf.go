package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/blis-sim/blis/lib/trace"
)

// --- inference-perf per_request_lifecycle_metrics.json ---
//
// kubernetes-sigs/inference-perf writes one record per request when
// report.request_lifecycle.per_request is on: start_time and end_time (the
// client's monotonic clock, s), the request body as JSON text, info (token
// counts and the time of every line of the streamed response) and error.
// Its layout changed: earlier versions put input_tokens, output_tokens and
// output_token_times directly in info; later ones nest them in
// request_metrics.text and response_metrics (with the server's usage when it
// sent one). Both are read.

type ipRecord struct {
	StartTime num             `json:"start_time"`
	EndTime   num             `json:"end_time"`
	Request   string          `json:"request"`
	Info      *ipInfo         `json:"info"`
	Error     json.RawMessage `json:"error"`
}

type ipInfo struct {
	InputTokens      num       `json:"input_tokens"`
	OutputTokens     num       `json:"output_tokens"`
	OutputTokenTimes []float64 `json:"output_token_times"`
	RequestMetrics   *struct {
		Text *struct {
			InputTokens num `json:"input_tokens"`
		} `json:"text"`
	} `json:"request_metrics"`
	ResponseMetrics *struct {
		OutputTokens     num            `json:"output_tokens"`
		OutputTokenTimes []float64      `json:"output_token_times"`
		ServerUsage      map[string]any `json:"server_usage"`
	} `json:"response_metrics"`
	ExtraInfo map[string]any `json:"extra_info"`
}

type ipBody struct {
	Model     string `json:"model"`
	MaxTokens *int64 `json:"max_tokens"`
	IgnoreEOS *bool  `json:"ignore_eos"`
	Stream    *bool  `json:"stream"`
	Messages  any    `json:"messages"`
}

// isInferencePerf recognises the per-request report: a JSON array whose
// first record has start_time, end_time and info.
func isInferencePerf(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return false
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	k := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		s, ok := t.(string)
		if !ok {
			break
		}
		k[s] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return k["start_time"] && k["end_time"] && k["info"]
}

func newInferencePerf(in *input, _ *Options) (parser, error) {
	var recs []ipRecord
	if err := decodeDoc(in, &recs); err != nil {
		return nil, err
	}
	base := baseName(in.path)
	l := &rowList{in: in, fm: formatMeta{name: "inference-perf"}}
	for i, rec := range recs {
		col := func(f string) string { return fmt.Sprintf("[%d].%s", i, f) }
		bad := func(f, want string, found any) error {
			return &BadRowError{Path: in.name, Column: col(f), Expected: want, Found: fmt.Sprint(found)}
		}
		st, ok := parseScaled(rec.StartTime, 1_000_000)
		if !ok {
			return nil, bad("start_time", "seconds on the client's clock", quoteFound(rec.StartTime))
		}
		et, ok := parseScaled(rec.EndTime, 1_000_000)
		if !ok || et < st {
			return nil, bad("end_time", "seconds, not before start_time", quoteFound(rec.EndTime))
		}
		if rec.Info == nil {
			return nil, bad("info", "the request's token counts and times", "nothing")
		}
		var body ipBody
		if rec.Request != "" {
			if err := json.Unmarshal([]byte(rec.Request), &body); err != nil {
				return nil, bad("request", "the request body as JSON text", err)
			}
		}
		r := Row{Request: trace.NewRequest(requestID(base, int64(i)))}
		r.ArrivalUS, r.T, r.SourceRow = 0, st, int64(i+1)
		r.Model = body.Model
		if body.Stream != nil {
			r.Streaming = *body.Stream
		}
		r.RequestType = trace.TypeCompletion
		if body.Messages != nil {
			r.RequestType = trace.TypeChat
		}
		info := rec.Info
		inTok, outTok, times := info.InputTokens, info.OutputTokens, info.OutputTokenTimes
		var usage map[string]any
		if m := info.RequestMetrics; m != nil && m.Text != nil && m.Text.InputTokens != nil {
			inTok = m.Text.InputTokens
		}
		if m := info.ResponseMetrics; m != nil {
			if m.OutputTokens != nil {
				outTok = m.OutputTokens
			}
			if m.OutputTokenTimes != nil {
				times = m.OutputTokenTimes
			}
			usage = m.ServerUsage
		}
		if s, ok := info.ExtraInfo["user_session"].(string); ok {
			r.SessionID = s
		}
		if v, ok := info.ExtraInfo["chat_round"].(float64); ok && v >= 0 && v < math.MaxInt32 {
			r.LoopIteration = int32(v)
		}
		// Prompt tokens: the server's count when it sent usage, else the
		// client's tokenizer over the prompt.
		if p, ok := usageInt(usage, "prompt_tokens"); ok {
			r.InputTokens = p
		} else if r.InputTokens, ok = parseTokens(inTok); !ok {
			return nil, bad("info.input_tokens", "a token count", quoteFound(inTok))
		}
		// Output tokens: the server's count; else, with ignore_eos, the
		// max_tokens it generated exactly; else the client's re-tokenisation
		// of the streamed text (approximate: a token that decodes to nothing
		// counts 0).
		if c, ok := usageInt(usage, "completion_tokens"); ok {
			r.OutputTokens = c
		} else if body.IgnoreEOS != nil && *body.IgnoreEOS && body.MaxTokens != nil && *body.MaxTokens >= 0 && *body.MaxTokens <= math.MaxInt32 {
			r.OutputTokens = int32(*body.MaxTokens)
		} else if r.OutputTokens, ok = parseTokens(outTok); !ok {
			return nil, bad("info.output_tokens", "a token count", quoteFound(outTok))
		}
		if len(rec.Error) > 0 && string(rec.Error) != "null" {
			r.SourceStatus = trace.SourceFailed
			l.rows = append(l.rows, r)
			continue
		}
		r.RecordedE2EUS = et - st
		if len(times) > 0 {
			first := int64(math.Round(times[0] * 1e6))
			last := int64(math.Round(times[len(times)-1] * 1e6))
			if first < st || last < first {
				return nil, bad("info.output_token_times", "times after start_time, in order", fmt.Sprintf("%g after a start at %g", times[0], float64(st)/1e6))
			}
			r.RecordedTTFTUS = first - st
			// The streamed lines' times: the mean time per generated token.
			if r.OutputTokens > 1 {
				r.RecordedITLUS = (last - first) / int64(r.OutputTokens-1)
			}
		}
		l.rows = append(l.rows, r)
	}
	// Records are written as requests end: in send order for the table.
	sort.SliceStable(l.rows, func(a, b int) bool { return l.rows[a].T < l.rows[b].T })
	return l, nil
}

// usageInt reads a token count from the server's usage object.
func usageInt(u map[string]any, k string) (int32, bool) {
	v, ok := u[k]
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float64:
		if x >= 0 && x <= math.MaxInt32 && x == math.Trunc(x) {
			return int32(x), true
		}
	case string:
		n, err := strconv.ParseInt(x, 10, 32)
		return int32(n), err == nil && n >= 0
	}
	return 0, false
}
