package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"

	"github.com/blis-sim/blis/lib/trace"
)

// jsonlBase reads one JSON object per line.
type jsonlBase struct {
	in   *input
	lr   *lineReader
	base string
	fm   formatMeta
}

func newJSONLBase(in *input, fm formatMeta) *jsonlBase {
	return &jsonlBase{in: in, lr: newLineReader(in.br), base: baseName(in.path), fm: fm}
}

func (j *jsonlBase) meta() formatMeta { return j.fm }
func (j *jsonlBase) path() string     { return j.in.name }

// decode reads the next non-blank line into v.
func (j *jsonlBase) decode(v any) error {
	for {
		line, err := j.lr.next()
		if err != nil {
			return err
		}
		line = bytes.TrimSpace(trimBOM(line))
		if len(line) == 0 {
			continue
		}
		if err := json.Unmarshal(line, v); err != nil {
			return jsonBad(j.in.name, j.lr.line, line, err)
		}
		return nil
	}
}

// jsonBad turns a json error into file:line: field: expected, found. Line 0
// is a whole JSON document (no lines): the byte offset locates the problem.
func jsonBad(path string, line int64, text []byte, err error) *BadRowError {
	doc := line == 0
	whole, expected := "line", "one JSON object per line"
	if doc {
		whole, expected = "document", "a complete JSON document"
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		col := te.Field
		if col == "" {
			col = whole
		}
		found := "a JSON " + te.Value
		if doc && te.Offset > 0 { // custom unmarshalers (num) report no offset
			found += fmt.Sprintf(" at byte %d", te.Offset)
		}
		return &BadRowError{Path: path, Line: line, Column: col, Expected: "a JSON " + jsonKind(te.Type.Kind().String()), Found: found}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if doc {
			return &BadRowError{Path: path, Column: whole, Expected: expected, Found: fmt.Sprintf("%s at byte %d", se.Error(), se.Offset)}
		}
		return &BadRowError{Path: path, Line: line, Column: whole, Expected: expected, Found: se.Error() + " in " + quoteFound(text)}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &BadRowError{Path: path, Line: line, Column: whole, Expected: expected, Found: "unexpected EOF (truncated)"}
	}
	return &BadRowError{Path: path, Line: line, Column: whole, Expected: expected, Found: err.Error()}
}

func jsonKind(k string) string {
	switch k {
	case "float64":
		return "number"
	case "int", "int32", "int64", "uint64":
		return "integer"
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	}
	return k
}

// num is a JSON number kept as text so it can be range-checked and parsed
// exactly; absent fields stay empty.
type num []byte

func (n *num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = nil
		return nil
	}
	if len(b) > 0 {
		kind := map[byte]string{'"': "string", '{': "object", '[': "array", 't': "boolean", 'f': "boolean"}[b[0]]
		if kind != "" {
			return &json.UnmarshalTypeError{Value: kind, Type: numType}
		}
	}
	*n = append((*n)[:0], b...)
	return nil
}

var numType = reflect.TypeOf(float64(0))

// jsonID is an identifier written as a JSON number or string.
type jsonID []byte

func (id *jsonID) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*id = nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = jsonID(s)
	case len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9'):
		*id = append((*id)[:0], b...)
	default:
		return &json.UnmarshalTypeError{Value: "non-id value", Type: reflect.TypeOf("")}
	}
	return nil
}

func (j *jsonlBase) tokens(field string, n num) (int32, error) {
	if n == nil {
		return 0, &BadRowError{Path: j.in.name, Line: j.lr.line, Column: field, Expected: "a token count", Found: "nothing"}
	}
	v, ok := parseTokens(n)
	if !ok {
		return 0, bad(j.in.name, j.lr.line, field, "a token count (integer >= 0)", n)
	}
	return v, nil
}

func (j *jsonlBase) time(field string, n num, mult int64) (int64, error) {
	if n == nil {
		return 0, &BadRowError{Path: j.in.name, Line: j.lr.line, Column: field, Expected: "a time", Found: "nothing"}
	}
	v, ok := parseScaled(n, mult)
	if !ok {
		return 0, bad(j.in.name, j.lr.line, field, unitWord(mult, false), n)
	}
	return v, nil
}

func (j *jsonlBase) start(r *Row, id string) {
	r.Request = trace.NewRequest(id)
	r.ArrivalUS = 0
	r.SourceRow = j.lr.line
}

func hashes(ids []int64, path string, line int64) ([]uint64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	dst := make([]uint64, len(ids))
	for i, h := range ids {
		if h < 0 {
			return nil, &BadRowError{Path: path, Line: line, Column: "hash_ids", Expected: "non-negative block ids", Found: strconv.FormatInt(h, 10)}
		}
		dst[i] = uint64(h)
	}
	return dst, nil
}

// --- Mooncake (FAST'25) JSONL, and its aiperf/Dynamo session variant ---

type mooncakeLine struct {
	Timestamp    num     `json:"timestamp"`
	InputLength  num     `json:"input_length"`
	OutputLength num     `json:"output_length"`
	HashIDs      []int64 `json:"hash_ids"`
	SessionID    string  `json:"session_id"`
	Delay        num     `json:"delay"`
}

type sessionState struct {
	lastID  string
	rootT   int64
	lastIn  int32
	lastOut int32
	turn    int32
}

type mooncakeParser struct {
	*jsonlBase
	sessions map[string]*sessionState
}

func newMooncake(in *input, _ *Options) (parser, error) {
	return &mooncakeParser{jsonlBase: newJSONLBase(in, formatMeta{name: "mooncake", blockSize: 512}), sessions: map[string]*sessionState{}}, nil
}

func (p *mooncakeParser) next(r *Row) error {
	var l mooncakeLine
	if err := p.decode(&l); err != nil {
		return err
	}
	p.start(r, requestID(p.base, p.lr.line))
	var err error
	if r.InputTokens, err = p.tokens("input_length", l.InputLength); err != nil {
		return err
	}
	if r.OutputTokens, err = p.tokens("output_length", l.OutputLength); err != nil {
		return err
	}
	if r.PrefixHashes, err = hashes(l.HashIDs, p.in.name, p.lr.line); err != nil {
		return err
	}
	if l.SessionID == "" {
		r.T, err = p.time("timestamp", l.Timestamp, 1000)
		return err
	}
	// aiperf sessions: the first turn has a timestamp; later turns carry a
	// delay (ms) after the previous turn and only the turn's new tokens.
	r.SessionID = l.SessionID
	s := p.sessions[l.SessionID]
	if s == nil || l.Timestamp != nil {
		if r.T, err = p.time("timestamp", l.Timestamp, 1000); err != nil {
			return err
		}
		p.sessions[l.SessionID] = &sessionState{lastID: r.ID, rootT: r.T, lastIn: r.InputTokens, lastOut: r.OutputTokens}
		return nil
	}
	delay := int64(0)
	if l.Delay != nil {
		if delay, err = p.time("delay", l.Delay, 1000); err != nil {
			return err
		}
		if delay < 0 {
			return bad(p.in.name, p.lr.line, "delay", "milliseconds >= 0", l.Delay)
		}
	}
	ctx := int64(s.lastIn) + int64(s.lastOut) + int64(r.InputTokens)
	if ctx > math.MaxInt32 {
		return bad(p.in.name, p.lr.line, "input_length", "a context that fits 2^31 tokens", l.InputLength)
	}
	s.turn++
	r.InputTokens = int32(ctx)
	r.ArrivalUS = trace.Null
	r.DependsOn = []string{s.lastID}
	r.DelayUS = delay
	r.LoopIteration = s.turn
	r.T = s.rootT
	s.lastID, s.lastIn, s.lastOut = r.ID, r.InputTokens, r.OutputTokens
	return nil
}

// --- Qwen-Bailian JSONL ---

type qwenLine struct {
	ChatID       jsonID  `json:"chat_id"`
	ParentChatID jsonID  `json:"parent_chat_id"`
	Timestamp    num     `json:"timestamp"`
	InputLength  num     `json:"input_length"`
	OutputLength num     `json:"output_length"`
	Type         string  `json:"type"`
	Turn         num     `json:"turn"`
	HashIDs      []int64 `json:"hash_ids"`
}

type qwenChat struct {
	session string
	rootT   int64
	t       int64
}

type qwenParser struct {
	*jsonlBase
	closed bool
	chats  map[string]qwenChat
}

func newQwen(in *input, o *Options) (parser, error) {
	return &qwenParser{jsonlBase: newJSONLBase(in, formatMeta{name: "qwen", blockSize: 16, buffer: o.Sessions == "closed", ownIDs: true}),
		closed: o.Sessions == "closed", chats: map[string]qwenChat{}}, nil
}

func (p *qwenParser) next(r *Row) error {
	var l qwenLine
	if err := p.decode(&l); err != nil {
		return err
	}
	if l.ChatID == nil {
		return &BadRowError{Path: p.in.name, Line: p.lr.line, Column: "chat_id", Expected: "a chat id", Found: "nothing"}
	}
	id := string(l.ChatID)
	p.start(r, id)
	var err error
	if r.T, err = p.time("timestamp", l.Timestamp, 1_000_000); err != nil {
		return err
	}
	if r.InputTokens, err = p.tokens("input_length", l.InputLength); err != nil {
		return err
	}
	if r.OutputTokens, err = p.tokens("output_length", l.OutputLength); err != nil {
		return err
	}
	if r.PrefixHashes, err = hashes(l.HashIDs, p.in.name, p.lr.line); err != nil {
		return err
	}
	if l.Turn != nil {
		t, ok := parseInt(l.Turn)
		if !ok || t < 0 || t > math.MaxInt32 {
			return bad(p.in.name, p.lr.line, "turn", "a turn number >= 0", l.Turn)
		}
		r.LoopIteration = int32(t)
	}
	r.TenantID = l.Type
	own := r.T
	parent := string(l.ParentChatID)
	pc, hasParent := p.chats[parent]
	if parent == "" || parent == "-1" || !hasParent {
		// A root, or a child whose parent is outside the file (a cut trace):
		// it keeps its recorded arrival.
		r.SessionID = id
		p.chats[id] = qwenChat{session: id, rootT: r.T, t: own}
		return nil
	}
	r.SessionID = pc.session
	p.chats[id] = qwenChat{session: pc.session, rootT: pc.rootT, t: own}
	if p.closed {
		// Qwen records no finish times: the delay is the gap between the two
		// arrivals, an upper bound on the user's think time.
		r.ArrivalUS = trace.Null
		r.DependsOn = []string{parent}
		r.DelayUS = max(own-pc.t, 0)
		r.T = pc.rootT
	}
	return nil
}

// --- LLMServingSim's real vLLM runs (vllm/requests.jsonl) ---

type servingSimLine struct {
	RequestID    string `json:"request_id"`
	InputToks    num    `json:"input_toks"`
	OutputToks   num    `json:"output_toks"`
	ArrivalTime  num    `json:"arrival_time"`
	QueuedTS     num    `json:"queued_ts"`
	ScheduledTS  num    `json:"scheduled_ts"`
	FirstTokenTS num    `json:"first_token_ts"`
	LastTokenTS  num    `json:"last_token_ts"`
}

type servingSimParser struct{ *jsonlBase }

func newLLMServingSim(in *input, _ *Options) (parser, error) {
	return &servingSimParser{newJSONLBase(in, formatMeta{name: "llmservingsim", ownIDs: true})}, nil
}

func (p *servingSimParser) next(r *Row) error {
	var l servingSimLine
	if err := p.decode(&l); err != nil {
		return err
	}
	id := l.RequestID
	if id == "" {
		id = requestID(p.base, p.lr.line)
	}
	p.start(r, id)
	var err error
	if r.InputTokens, err = p.tokens("input_toks", l.InputToks); err != nil {
		return err
	}
	if r.OutputTokens, err = p.tokens("output_toks", l.OutputToks); err != nil {
		return err
	}
	// The engine timestamps share one monotonic clock; arrival_time is the
	// client's wall clock. Arrivals are taken as the engine saw them (queued_ts)
	// so that recorded latencies and arrivals are on the same clock.
	q, err := p.time("queued_ts", l.QueuedTS, 1_000_000)
	if err != nil {
		return err
	}
	r.T = q
	if l.FirstTokenTS == nil || l.LastTokenTS == nil {
		r.SourceStatus = trace.SourceFailed
		return nil
	}
	ft, err := p.time("first_token_ts", l.FirstTokenTS, 1_000_000)
	if err != nil {
		return err
	}
	lt, err := p.time("last_token_ts", l.LastTokenTS, 1_000_000)
	if err != nil {
		return err
	}
	if ft < q || lt < ft {
		return bad(p.in.name, p.lr.line, "last_token_ts", "queued_ts <= first_token_ts <= last_token_ts", l.LastTokenTS)
	}
	r.RecordedTTFTUS = ft - q
	r.RecordedE2EUS = lt - q
	if r.OutputTokens > 1 {
		r.RecordedITLUS = (lt - ft) / int64(r.OutputTokens-1)
	}
	return nil
}

// --- generic JSONL mapped by flags ---

type genericJSONL struct {
	*jsonlBase
	g    Generic
	mult int64
	iso  bool
}

func newGenericJSONL(in *input, o *Options) (parser, error) {
	g := o.Generic
	if g.TimeCol == "" || g.InputCol == "" || g.OutputCol == "" {
		return nil, usageErr("--format jsonl needs --time-col, --input-col and --output-col")
	}
	mult, iso, err := timeUnit(g.TimeUnit)
	if err != nil {
		return nil, err
	}
	return &genericJSONL{jsonlBase: newJSONLBase(in, formatMeta{name: "jsonl", epoch: iso, ownIDs: o.Generic.IDCol != ""}), g: g, mult: mult, iso: iso}, nil
}

func (p *genericJSONL) str(m map[string]json.RawMessage, key string) (string, error) {
	v, ok := m[key]
	if key == "" || !ok || string(v) == "null" {
		return "", nil
	}
	if len(v) > 0 && v[0] == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", bad(p.in.name, p.lr.line, key, "a string", v)
		}
		return s, nil
	}
	if len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		return string(v), nil
	}
	return "", bad(p.in.name, p.lr.line, key, "a string or number", v)
}

func (p *genericJSONL) field(m map[string]json.RawMessage, key string) num {
	v, ok := m[key]
	if !ok || string(v) == "null" {
		return nil
	}
	return num(bytes.Trim(v, `"`))
}

func (p *genericJSONL) next(r *Row) error {
	var m map[string]json.RawMessage
	if err := p.decode(&m); err != nil {
		return err
	}
	id, err := p.str(m, p.g.IDCol)
	if err != nil {
		return err
	}
	if id == "" {
		id = requestID(p.base, p.lr.line)
	}
	p.start(r, id)
	tv := p.field(m, p.g.TimeCol)
	t, ok := parseTime(tv, p.mult, p.iso)
	if !ok {
		return bad(p.in.name, p.lr.line, p.g.TimeCol, unitWord(p.mult, p.iso), tv)
	}
	r.T = t
	if r.InputTokens, err = p.tokens(p.g.InputCol, p.field(m, p.g.InputCol)); err != nil {
		return err
	}
	if r.OutputTokens, err = p.tokens(p.g.OutputCol, p.field(m, p.g.OutputCol)); err != nil {
		return err
	}
	if r.Model, err = p.str(m, p.g.ModelCol); err != nil {
		return err
	}
	if r.TenantID, err = p.str(m, p.g.TenantCol); err != nil {
		return err
	}
	if r.SessionID, err = p.str(m, p.g.SessionCol); err != nil {
		return err
	}
	r.LoRA, err = p.str(m, p.g.LoRACol)
	return err
}
