package convert

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// decodeDoc decodes a whole JSON document into v. Anything after it but
// white space is an error: it is not one document (e.g. JSON lines read
// with a document --format).
func decodeDoc(in *input, v any) error {
	dec := json.NewDecoder(in.br)
	if err := dec.Decode(v); err != nil {
		return jsonBad(in.name, 0, nil, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &BadRowError{Path: in.name, Column: "document", Expected: "one JSON document",
			Found: fmt.Sprintf("more data after it at byte %d", dec.InputOffset())}
	}
	return nil
}

// rowList serves rows built in memory from a whole JSON document.
type rowList struct {
	in   *input
	rows []Row
	i    int
	fm   formatMeta
}

func (l *rowList) meta() formatMeta { return l.fm }
func (l *rowList) path() string     { return l.in.name }
func (l *rowList) next(r *Row) error {
	if l.i >= len(l.rows) {
		return io.EOF
	}
	*r = l.rows[l.i]
	l.rows[l.i] = Row{}
	l.i++
	return nil
}

// --- vLLM `bench serve --save-result --save-detailed` JSON ---

type vllmBench struct {
	ModelID    string          `json:"model_id"`
	InputLens  []num           `json:"input_lens"`
	OutputLens []num           `json:"output_lens"`
	TTFTs      []num           `json:"ttfts"`
	ITLs       [][]num         `json:"-"`
	RawITLs    json.RawMessage `json:"itls"`
	Latencies  []num           `json:"latencies"`
	E2ELs      []num           `json:"e2els"`
	StartTimes []num           `json:"start_times"`
	Errors     []string        `json:"errors"`
}

func newVLLMBench(in *input, _ *Options) (parser, error) {
	var b vllmBench
	if err := decodeDoc(in, &b); err != nil {
		return nil, err
	}
	if b.InputLens == nil {
		return nil, &BadRowError{Path: in.name, Column: "input_lens", Expected: "an array of prompt lengths", Found: "nothing"}
	}
	if len(b.RawITLs) > 0 && string(b.RawITLs) != "null" {
		if err := json.Unmarshal(b.RawITLs, &b.ITLs); err != nil {
			return nil, jsonBad(in.name, 0, nil, fmt.Errorf("itls: %w", err))
		}
	}
	n := len(b.InputLens)
	if len(b.StartTimes) == 0 {
		return nil, &NotTraceError{Path: in.name, What: "a vLLM benchmark result without start_times",
			Why: "vLLM versions before start_times was added record lengths and latencies but not when each request was sent; use blis-synth with its lengths, or rerun the benchmark with a current vLLM"}
	}
	lens := func(name string, l int) error {
		if l != 0 && l != n {
			return &BadRowError{Path: in.name, Column: name, Expected: fmt.Sprintf("%d entries like input_lens", n), Found: fmt.Sprintf("%d", l)}
		}
		return nil
	}
	for _, c := range []struct {
		name string
		l    int
	}{{"output_lens", len(b.OutputLens)}, {"ttfts", len(b.TTFTs)}, {"itls", len(b.ITLs)}, {"start_times", len(b.StartTimes)},
		{"latencies", len(b.Latencies)}, {"e2els", len(b.E2ELs)}, {"errors", len(b.Errors)}} {
		if err := lens(c.name, c.l); err != nil {
			return nil, err
		}
	}
	if len(b.OutputLens) != n {
		return nil, &BadRowError{Path: in.name, Column: "output_lens", Expected: fmt.Sprintf("%d entries like input_lens", n), Found: fmt.Sprintf("%d", len(b.OutputLens))}
	}
	lat := b.Latencies
	if lat == nil {
		lat = b.E2ELs
	}
	base := baseName(in.path)
	l := &rowList{in: in, fm: formatMeta{name: "vllm-bench"}}
	secs := func(col string, i int, v num) (int64, error) {
		t, ok := parseScaled(v, 1_000_000)
		if !ok || t < 0 {
			return 0, &BadRowError{Path: in.name, Column: fmt.Sprintf("%s[%d]", col, i), Expected: "seconds >= 0", Found: quoteFound(v)}
		}
		return t, nil
	}
	for i := 0; i < n; i++ {
		r := Row{Request: trace.NewRequest(requestID(base, int64(i)))}
		r.ArrivalUS = 0
		r.SourceRow = int64(i + 1)
		r.Model = b.ModelID
		var ok bool
		if r.InputTokens, ok = parseTokens(b.InputLens[i]); !ok {
			return nil, &BadRowError{Path: in.name, Column: fmt.Sprintf("input_lens[%d]", i), Expected: "a token count", Found: quoteFound(b.InputLens[i])}
		}
		if r.OutputTokens, ok = parseTokens(b.OutputLens[i]); !ok {
			return nil, &BadRowError{Path: in.name, Column: fmt.Sprintf("output_lens[%d]", i), Expected: "a token count", Found: quoteFound(b.OutputLens[i])}
		}
		t, ok := parseScaled(b.StartTimes[i], 1_000_000)
		if !ok {
			return nil, &BadRowError{Path: in.name, Column: fmt.Sprintf("start_times[%d]", i), Expected: "seconds", Found: quoteFound(b.StartTimes[i])}
		}
		r.T = t
		if len(b.Errors) == n && b.Errors[i] != "" {
			r.SourceStatus = trace.SourceFailed
			l.rows = append(l.rows, r)
			continue
		}
		var err error
		if len(b.TTFTs) == n && b.TTFTs[i] != nil {
			if r.RecordedTTFTUS, err = secs("ttfts", i, b.TTFTs[i]); err != nil {
				return nil, err
			}
		}
		var sumITL int64
		if len(b.ITLs) == n && len(b.ITLs[i]) > 0 {
			for j, v := range b.ITLs[i] {
				x, err := secs(fmt.Sprintf("itls[%d]", i), j, v)
				if err != nil {
					return nil, err
				}
				sumITL += x
			}
			r.RecordedITLUS = sumITL / int64(len(b.ITLs[i]))
		}
		switch {
		case len(lat) == n && lat[i] != nil:
			if r.RecordedE2EUS, err = secs("latencies", i, lat[i]); err != nil {
				return nil, err
			}
		case r.RecordedTTFTUS != trace.Null && len(b.ITLs) == n:
			r.RecordedE2EUS = r.RecordedTTFTUS + sumITL
		}
		l.rows = append(l.rows, r)
	}
	return l, nil
}

// --- OpenTelemetry GenAI span exports ---

type otelDoc struct {
	TraceID string     `json:"trace_id"`
	Spans   []otelSpan `json:"spans"`
}

type otelSpan struct {
	TraceID    string                     `json:"trace_id"`
	SpanID     string                     `json:"span_id"`
	Parent     *string                    `json:"parent_span_id"`
	Start      string                     `json:"start_time"`
	End        string                     `json:"end_time"`
	Attributes map[string]json.RawMessage `json:"attributes"`
}

func newOTel(in *input, o *Options) (parser, error) {
	var d otelDoc
	if err := decodeDoc(in, &d); err != nil {
		return nil, err
	}
	if d.Spans == nil {
		return nil, &BadRowError{Path: in.name, Column: "spans", Expected: "an array of spans", Found: "nothing"}
	}
	l := &rowList{in: in, fm: formatMeta{name: "otel", epoch: true, ownIDs: true}}
	withoutUsage := 0
	var ends []int64
	for i, s := range d.Spans {
		inTok, okIn := attrNum(s.Attributes, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
		outTok, okOut := attrNum(s.Attributes, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
		if !okIn || !okOut {
			withoutUsage++
			continue
		}
		st, ok := parseTimestamp([]byte(s.Start))
		if !ok {
			return nil, &BadRowError{Path: in.name, Column: fmt.Sprintf("spans[%d].start_time", i), Expected: "an ISO 8601 time", Found: quoteFound([]byte(s.Start))}
		}
		r := Row{Request: trace.NewRequest(s.SpanID), T: st}
		if r.ID == "" {
			r.ID = fmt.Sprintf("%s:%d", baseName(in.path), i)
		}
		r.ArrivalUS = 0
		r.SourceRow = int64(i + 1)
		r.InputTokens, r.OutputTokens = int32(inTok), int32(outTok)
		r.Model = attrString(s.Attributes, "gen_ai.response.model", "gen_ai.request.model")
		r.SessionID = attrString(s.Attributes, "session.id", "exgentic.session.id", "gen_ai.conversation.id")
		if r.SessionID == "" {
			r.SessionID = s.TraceID
		}
		end := st
		if et, ok := parseTimestamp([]byte(s.End)); ok && et >= st {
			r.RecordedE2EUS = et - st
			end = et
		}
		l.rows = append(l.rows, r)
		ends = append(ends, end)
	}
	if len(l.rows) == 0 && withoutUsage > 0 {
		return nil, &NotTraceError{Path: in.name, What: "an OpenTelemetry GenAI span export without token counts",
			Why: fmt.Sprintf("none of its %d spans has gen_ai.usage.input_tokens/output_tokens, and counting tokens of the message text would need the model's tokenizer; export spans with usage attributes", withoutUsage)}
	}
	if withoutUsage > 0 {
		return nil, &BadRowError{Path: in.name, Column: "spans", Expected: "gen_ai.usage token counts on every span",
			Found: fmt.Sprintf("%d span(s) without them", withoutUsage)}
	}
	if o.Sessions == "closed" {
		otelDAG(l.rows, ends)
		l.fm.buffer = true
	}
	return l, nil
}

// otelDAG rebuilds the happens-before graph of each session's LLM calls
// from their timing: a call depends on the calls of its session that had
// ended when it started and that no other such call started after. A fan-out
// (calls started after one call ended) and a fan-in (a call started after
// all of them ended) come out as such. Span parents are not used: an OTel
// parent encloses its children rather than preceding them.
func otelDAG(rows []Row, ends []int64) {
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return rows[idx[a]].T < rows[idx[b]].T })
	start := make([]int64, len(rows))
	for i := range rows {
		start[i] = rows[i].T
	}
	bySession := map[string][]int{}
	for _, i := range idx {
		r := &rows[i]
		prev := bySession[r.SessionID]
		var deps []int
		for _, c := range prev {
			if ends[c] > start[i] {
				continue
			}
			frontier := true
			for _, d := range prev {
				if d != c && ends[d] <= start[i] && start[d] >= ends[c] {
					frontier = false
					break
				}
			}
			if frontier {
				deps = append(deps, c)
			}
		}
		if len(deps) > 0 {
			var ready, t int64
			for _, d := range deps {
				r.DependsOn = append(r.DependsOn, rows[d].ID)
				ready = max(ready, ends[d])
				t = max(t, rows[d].T)
			}
			r.ArrivalUS = trace.Null
			r.DelayUS = start[i] - ready
			r.T = t // sorts after every root it descends from
		}
		bySession[r.SessionID] = append(prev, i)
	}
	// Write in start order so that every dependency precedes its dependents.
	sorted := make([]Row, len(rows))
	for k, i := range idx {
		sorted[k] = rows[i]
	}
	copy(rows, sorted)
}

func attrNum(a map[string]json.RawMessage, keys ...string) (int64, bool) {
	for _, k := range keys {
		if v, ok := a[k]; ok {
			n, ok := parseInt([]byte(strings.Trim(string(v), `"`)))
			if ok && n >= 0 && n <= 1<<31-1 {
				return n, true
			}
		}
	}
	return 0, false
}

func attrString(a map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		if v, ok := a[k]; ok {
			var s string
			if json.Unmarshal(v, &s) == nil && s != "" {
				return s
			}
		}
	}
	return ""
}
