package convert

import (
	"bytes"
	"io"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// csvBase reads a headed CSV file line by line.
type csvBase struct {
	in     *input
	lr     *lineReader
	base   string // basename for request ids
	header []string
	fields [][]byte
	fm     formatMeta
}

func newCSVBase(in *input, fm formatMeta) (*csvBase, error) {
	c := &csvBase{in: in, lr: newLineReader(in.br), base: baseName(in.path), fm: fm}
	line, err := c.lr.next()
	if err == io.EOF {
		return nil, usageErr("%s: empty file: expected a CSV header line", in.name)
	}
	if err != nil {
		return nil, err
	}
	line = trimBOM(line)
	f, err := splitCSV(nil, line)
	if err != nil {
		return nil, &BadRowError{Path: in.name, Line: 1, Column: "header", Expected: "a CSV header", Found: err.Error()}
	}
	for _, h := range f {
		c.header = append(c.header, strings.TrimSpace(string(h)))
	}
	return c, nil
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf {
		return b[3:]
	}
	return b
}

func (c *csvBase) meta() formatMeta { return c.fm }
func (c *csvBase) path() string     { return c.in.name }

// col finds a header column case-insensitively; -1 when absent.
func (c *csvBase) col(names ...string) int {
	for _, n := range names {
		for i, h := range c.header {
			if strings.EqualFold(h, n) {
				return i
			}
		}
	}
	return -1
}

// need is col for a required column.
func (c *csvBase) need(name string) (int, error) {
	i := c.col(name)
	if i < 0 {
		return 0, &BadRowError{Path: c.in.name, Line: 1, Column: "header", Expected: "a column named " + name,
			Found: quoteFound([]byte(strings.Join(c.header, ",")))}
	}
	return i, nil
}

// row returns the next non-empty line split into exactly len(header) fields.
func (c *csvBase) row() ([][]byte, error) {
	for {
		line, err := c.lr.next()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			continue
		}
		c.fields, err = splitCSV(c.fields, line)
		if err != nil {
			found := err.Error()
			if bytes.Count(line, []byte{'"'})%2 == 1 {
				found = "an unterminated quoted field (a field may not span lines)"
			}
			return nil, &BadRowError{Path: c.in.name, Line: c.lr.line, Column: "row", Expected: "a CSV line", Found: found}
		}
		if len(c.fields) != len(c.header) {
			return nil, &BadRowError{Path: c.in.name, Line: c.lr.line, Column: "row",
				Expected: itoa(len(c.header)) + " fields", Found: itoa(len(c.fields)) + " fields"}
		}
		return c.fields, nil
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func (c *csvBase) tokens(f [][]byte, i int) (int32, error) {
	v, ok := parseTokens(f[i])
	if !ok {
		return 0, bad(c.in.name, c.lr.line, c.header[i], "a token count (integer >= 0)", f[i])
	}
	return v, nil
}

func (c *csvBase) start(r *Row, id string) {
	r.Request = trace.NewRequest(id)
	r.ArrivalUS = 0
	r.SourceRow = c.lr.line
}

// --- Azure LLM inference traces (2023, 2024) and the 2025 multimodal one ---

type azureParser struct {
	*csvBase
	ts, ctx, gen int
	images       int // NumImages (the 2025 multimodal trace), -1 when absent
}

func newAzure(in *input, _ *Options) (parser, error) {
	c, err := newCSVBase(in, formatMeta{name: "azure", epoch: true})
	if err != nil {
		return nil, err
	}
	p := &azureParser{csvBase: c, images: c.col("NumImages")}
	if p.ts, err = c.need("TIMESTAMP"); err != nil {
		return nil, err
	}
	if p.ctx, err = c.need("ContextTokens"); err != nil {
		return nil, err
	}
	if p.gen, err = c.need("GeneratedTokens"); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *azureParser) next(r *Row) error {
	f, err := p.row()
	if err != nil {
		return err
	}
	t, ok := parseTimestamp(f[p.ts])
	if !ok {
		return bad(p.in.name, p.lr.line, p.header[p.ts], "a timestamp like 2023-11-16 18:17:03.9799600", f[p.ts])
	}
	p.start(r, requestID(p.base, p.lr.line))
	r.T = t
	if r.InputTokens, err = p.tokens(f, p.ctx); err != nil {
		return err
	}
	if r.OutputTokens, err = p.tokens(f, p.gen); err != nil {
		return err
	}
	if p.images >= 0 {
		// The image tokens are already counted in ContextTokens.
		n, ok := parseTokens(f[p.images])
		if !ok {
			return bad(p.in.name, p.lr.line, p.header[p.images], "an image count (integer >= 0)", f[p.images])
		}
		r.NumImages = n
		if n > 0 {
			r.RequestType = trace.TypeMultimodal
		}
	}
	return nil
}

// --- BurstGPT (v1 and v2 layouts, read by header name) ---

type burstParser struct {
	*csvBase
	ts, model, req, resp, logType, session, elapsed int
}

func newBurstGPT(in *input, _ *Options) (parser, error) {
	c, err := newCSVBase(in, formatMeta{name: "burstgpt"})
	if err != nil {
		return nil, err
	}
	p := &burstParser{csvBase: c, model: c.col("Model"), logType: c.col("Log Type"),
		session: c.col("Session ID"), elapsed: c.col("Elapsed time")}
	if p.ts, err = c.need("Timestamp"); err != nil {
		return nil, err
	}
	if p.req, err = c.need("Request tokens"); err != nil {
		return nil, err
	}
	if p.resp, err = c.need("Response tokens"); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *burstParser) next(r *Row) error {
	f, err := p.row()
	if err != nil {
		return err
	}
	t, ok := parseScaled(f[p.ts], 1_000_000)
	if !ok {
		return bad(p.in.name, p.lr.line, p.header[p.ts], "seconds", f[p.ts])
	}
	p.start(r, requestID(p.base, p.lr.line))
	r.T = t
	if r.InputTokens, err = p.tokens(f, p.req); err != nil {
		return err
	}
	if r.OutputTokens, err = p.tokens(f, p.resp); err != nil {
		return err
	}
	if r.OutputTokens == 0 {
		r.SourceStatus = trace.SourceFailed // BurstGPT logs failures with 0 response tokens
	}
	if p.model >= 0 {
		r.Model = string(trimSpace(f[p.model]))
	}
	if p.logType >= 0 {
		r.TenantID = string(trimSpace(f[p.logType]))
	}
	if p.session >= 0 {
		r.SessionID = string(trimSpace(f[p.session]))
	}
	if p.elapsed >= 0 && len(trimSpace(f[p.elapsed])) > 0 {
		e, ok := parseScaled(f[p.elapsed], 1_000_000)
		if !ok || e < 0 {
			return bad(p.in.name, p.lr.line, p.header[p.elapsed], "seconds >= 0", f[p.elapsed])
		}
		r.RecordedE2EUS = e
	}
	return nil
}

// --- Vidur processed traces: arrived_at (s), num_prefill_tokens, num_decode_tokens ---

type vidurParser struct {
	*csvBase
	ts, in, out int
}

func newVidur(in *input, _ *Options) (parser, error) {
	c, err := newCSVBase(in, formatMeta{name: "vidur"})
	if err != nil {
		return nil, err
	}
	p := &vidurParser{csvBase: c}
	if c.col("arrived_at") < 0 && c.col("num_prefill_tokens") >= 0 {
		return nil, errLengthsOnly(in.name)
	}
	if p.ts, err = c.need("arrived_at"); err != nil {
		return nil, err
	}
	if p.in, err = c.need("num_prefill_tokens"); err != nil {
		return nil, err
	}
	if p.out, err = c.need("num_decode_tokens"); err != nil {
		return nil, err
	}
	return p, nil
}

func errLengthsOnly(name string) error {
	return &NotTraceError{Path: name, What: "a table of request lengths (Vidur stats)",
		Why: "it has prompt and output lengths but no arrival times; use blis-synth with an empirical length distribution from this file instead"}
}

func (p *vidurParser) next(r *Row) error {
	f, err := p.row()
	if err != nil {
		return err
	}
	t, ok := parseScaled(f[p.ts], 1_000_000)
	if !ok {
		return bad(p.csvBase.in.name, p.lr.line, p.header[p.ts], "seconds", f[p.ts])
	}
	p.start(r, requestID(p.base, p.lr.line))
	r.T = t
	if r.InputTokens, err = p.tokens(f, p.in); err != nil {
		return err
	}
	r.OutputTokens, err = p.tokens(f, p.out)
	return err
}

// --- Splitwise simulator traces ---

type splitwiseParser struct {
	*csvBase
	id, app, ts, prompt, toks int
}

func newSplitwise(in *input, _ *Options) (parser, error) {
	c, err := newCSVBase(in, formatMeta{name: "splitwise"})
	if err != nil {
		return nil, err
	}
	p := &splitwiseParser{csvBase: c, id: c.col("request_id"), app: c.col("application_id")}
	c.fm.ownIDs = p.id >= 0
	if p.ts, err = c.need("arrival_timestamp"); err != nil {
		return nil, err
	}
	if p.prompt, err = c.need("prompt_size"); err != nil {
		return nil, err
	}
	if p.toks, err = c.need("token_size"); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *splitwiseParser) next(r *Row) error {
	f, err := p.row()
	if err != nil {
		return err
	}
	t, ok := parseScaled(f[p.ts], 1_000_000)
	if !ok {
		return bad(p.in.name, p.lr.line, p.header[p.ts], "seconds", f[p.ts])
	}
	id := requestID(p.base, p.lr.line)
	if p.id >= 0 {
		v := trimSpace(f[p.id])
		if len(v) == 0 {
			return bad(p.in.name, p.lr.line, p.header[p.id], "a request id", v)
		}
		id = p.base + ":" + string(v)
	}
	p.start(r, id)
	r.T = t
	if p.app >= 0 {
		r.TenantID = string(trimSpace(f[p.app]))
	}
	if r.InputTokens, err = p.tokens(f, p.prompt); err != nil {
		return err
	}
	r.OutputTokens, err = p.tokens(f, p.toks)
	return err
}

// --- generic CSV mapped by flags ---

// timeUnit returns the multiplier to µs (negative: divide) and whether the
// unit is absolute ISO time.
func timeUnit(u string) (mult int64, iso bool, err error) {
	switch u {
	case "s", "":
		return 1_000_000, false, nil
	case "ms":
		return 1000, false, nil
	case "us":
		return 1, false, nil
	case "ns":
		return -1000, false, nil
	case "iso":
		return 0, true, nil
	}
	return 0, false, usageErr("--time-unit: expected s, ms, us, ns or iso, found %q", u)
}

// parseTime parses a time field in the given unit into µs.
func parseTime(b []byte, mult int64, iso bool) (int64, bool) {
	if iso {
		return parseTimestamp(b)
	}
	if mult < 0 {
		v, ok := parseScaled(b, 1)
		return v / -mult, ok
	}
	return parseScaled(b, mult)
}

func unitWord(mult int64, iso bool) string {
	switch {
	case iso:
		return "an ISO 8601 time"
	case mult == 1_000_000:
		return "seconds"
	case mult == 1000:
		return "milliseconds"
	case mult == 1:
		return "microseconds"
	}
	return "nanoseconds"
}

type genericCSV struct {
	*csvBase
	ts, inCol, out, id, model, tenant, session, lora int
	mult                                             int64
	iso                                              bool
}

func newGenericCSV(in *input, o *Options) (parser, error) {
	g := o.Generic
	if g.TimeCol == "" || g.InputCol == "" || g.OutputCol == "" {
		return nil, usageErr("--format csv needs --time-col, --input-col and --output-col")
	}
	mult, iso, err := timeUnit(g.TimeUnit)
	if err != nil {
		return nil, err
	}
	c, err := newCSVBase(in, formatMeta{name: "csv", epoch: iso})
	if err != nil {
		return nil, err
	}
	p := &genericCSV{csvBase: c, mult: mult, iso: iso, id: -1, model: -1, tenant: -1, session: -1, lora: -1}
	c.fm.ownIDs = g.IDCol != ""
	for _, x := range []struct {
		dst  *int
		name string
		req  bool
	}{{&p.ts, g.TimeCol, true}, {&p.inCol, g.InputCol, true}, {&p.out, g.OutputCol, true},
		{&p.id, g.IDCol, false}, {&p.model, g.ModelCol, false}, {&p.tenant, g.TenantCol, false}, {&p.session, g.SessionCol, false}, {&p.lora, g.LoRACol, false}} {
		if x.name == "" {
			continue
		}
		if *x.dst, err = c.need(x.name); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *genericCSV) next(r *Row) error {
	f, err := p.row()
	if err != nil {
		return err
	}
	t, ok := parseTime(f[p.ts], p.mult, p.iso)
	if !ok {
		return bad(p.in.name, p.lr.line, p.header[p.ts], unitWord(p.mult, p.iso), f[p.ts])
	}
	id := requestID(p.base, p.lr.line)
	if p.id >= 0 {
		id = string(trimSpace(f[p.id]))
		if id == "" {
			return bad(p.in.name, p.lr.line, p.header[p.id], "a request id", f[p.id])
		}
	}
	p.start(r, id)
	r.T = t
	if r.InputTokens, err = p.tokens(f, p.inCol); err != nil {
		return err
	}
	if r.OutputTokens, err = p.tokens(f, p.out); err != nil {
		return err
	}
	if p.model >= 0 {
		r.Model = string(trimSpace(f[p.model]))
	}
	if p.tenant >= 0 {
		r.TenantID = string(trimSpace(f[p.tenant]))
	}
	if p.session >= 0 {
		r.SessionID = string(trimSpace(f[p.session]))
	}
	if p.lora >= 0 {
		r.LoRA = string(trimSpace(f[p.lora]))
	}
	return nil
}
