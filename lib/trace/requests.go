package trace

import (
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// requestBuilder appends Request fields to the first len(requestFields)
// columns of a record builder.
type requestBuilder struct {
	id        *array.StringBuilder
	arrival   *array.Int64Builder
	deps      *array.ListBuilder
	depsV     *array.StringBuilder
	delay     *array.Int64Builder
	kind      *dictCol
	in, out   *array.Int32Builder
	hashes    *array.ListBuilder
	hashesV   *array.Uint64Builder
	session   *array.StringBuilder
	tenant    *dictCol
	slo       *dictCol
	model     *dictCol
	prio      *array.Int32Builder
	step      *dictCol
	loop      *array.Int32Builder
	stream    *array.BooleanBuilder
	srcStatus *dictCol
	rTTFT     *array.Int64Builder
	rE2E      *array.Int64Builder
	rITL      *array.Int64Builder
	srcRow    *array.Int64Builder
	timeout   *array.Int64Builder
	rtype     *dictCol
	images    *array.Int32Builder
	stage     *dictCol
	lora      *dictCol
}

func newRequestBuilder(w *batchWriter) requestBuilder {
	b := w.b
	f := b.Field
	rb := requestBuilder{
		id: f(0).(*array.StringBuilder), arrival: f(1).(*array.Int64Builder),
		deps: f(2).(*array.ListBuilder), delay: f(3).(*array.Int64Builder),
		kind: w.dicts[4], in: f(5).(*array.Int32Builder),
		out: f(6).(*array.Int32Builder), hashes: f(7).(*array.ListBuilder),
		session: f(8).(*array.StringBuilder), tenant: w.dicts[9],
		slo: w.dicts[10], model: w.dicts[11],
		prio: f(12).(*array.Int32Builder), step: w.dicts[13],
		loop: f(14).(*array.Int32Builder), stream: f(15).(*array.BooleanBuilder),
		srcStatus: w.dicts[16], rTTFT: f(17).(*array.Int64Builder),
		rE2E: f(18).(*array.Int64Builder), rITL: f(19).(*array.Int64Builder),
		srcRow: f(20).(*array.Int64Builder), timeout: f(21).(*array.Int64Builder),
		rtype: w.dicts[22], images: f(23).(*array.Int32Builder), stage: w.dicts[24], lora: w.dicts[25],
	}
	rb.depsV = rb.deps.ValueBuilder().(*array.StringBuilder)
	rb.hashesV = rb.hashes.ValueBuilder().(*array.Uint64Builder)
	return rb
}

func appendNullable64(b *array.Int64Builder, v int64) {
	if v == Null {
		b.AppendNull()
	} else {
		b.Append(v)
	}
}

// put appends r into builders with room for the row (see put64).
func (b *requestBuilder) put(r *Request) {
	b.id.Append(r.ID)
	put64(b.arrival, r.ArrivalUS)
	if len(r.DependsOn) == 0 {
		b.deps.AppendNull()
	} else {
		b.deps.Append(true)
		for _, d := range r.DependsOn {
			b.depsV.Append(d)
		}
	}
	b.delay.UnsafeAppend(r.DelayUS)
	b.kind.append(r.Kind)
	put32(b.in, r.InputTokens)
	put32(b.out, r.OutputTokens)
	if len(r.PrefixHashes) == 0 {
		b.hashes.AppendNull()
	} else {
		b.hashes.Append(true)
		b.hashesV.AppendValues(r.PrefixHashes, nil)
	}
	if r.SessionID == "" {
		b.session.AppendNull()
	} else {
		b.session.Append(r.SessionID)
	}
	b.tenant.append(r.TenantID)
	b.slo.append(r.SLOClass)
	b.model.append(r.Model)
	put32(b.prio, r.Priority)
	b.step.append(r.StepID)
	put32(b.loop, r.LoopIteration)
	b.stream.UnsafeAppend(r.Streaming)
	b.srcStatus.append(r.SourceStatus)
	put64(b.rTTFT, r.RecordedTTFTUS)
	put64(b.rE2E, r.RecordedE2EUS)
	put64(b.rITL, r.RecordedITLUS)
	b.srcRow.UnsafeAppend(r.SourceRow)
	if r.TimeoutUS == 0 {
		b.timeout.UnsafeAppendBoolToBitmap(false)
	} else {
		b.timeout.UnsafeAppend(r.TimeoutUS)
	}
	b.rtype.append(r.RequestType)
	put32(b.images, r.NumImages)
	b.stage.append(r.Stage)
	b.lora.append(r.LoRA)
}

// RequestWriter writes Request rows in batches.
type RequestWriter struct {
	batchWriter
	rb requestBuilder
}

// NewRequestWriter writes requests with metadata md to sink (see Create; the
// sink must have been created with RequestsSchema(md)).
func NewRequestWriter(sink Sink, schema *arrow.Schema) *RequestWriter {
	w := &RequestWriter{batchWriter: newBatchWriter(sink, schema)}
	w.rb = newRequestBuilder(&w.batchWriter)
	return w
}

// Write appends one request.
func (w *RequestWriter) Write(r *Request) error {
	w.rb.put(r)
	return w.added()
}

// Rows returns the number of rows written so far.
func (w *RequestWriter) Rows() int64 { return w.rows }

// Close flushes the last batch and closes the sink.
func (w *RequestWriter) Close() error { return w.close() }

// Abort ends the output of a failed run: a file is removed (an earlier one
// at the path stays), a stream is left without its end-of-stream marker.
func (w *RequestWriter) Abort() { w.abort() }

// requestCols decodes request columns of a batch.
type requestCols struct {
	id, kind, session, tenant, slo, model, step, srcStatus strCol
	rtype, stage, lora                                     strCol
	arrival, delay, in, out, prio, loop, rTTFT, rE2E       intCol
	rITL, srcRow, timeout, images                          intCol
	stream                                                 boolCol
	deps                                                   strListCol
	hashes                                                 u64ListCol
}

func checkRequestSchema(s *arrow.Schema) error {
	var missing []string
	for _, c := range RequiredRequestColumns {
		if colIndex(s, c) < 0 {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not a requests table: missing column(s) %v", missing)
	}
	for _, c := range []string{ColRequestID, ColKind, ColSessionID, ColTenantID, ColSLOClass, ColModel, ColStepID, ColSourceStatus, ColRequestType, ColStage, ColLoRA} {
		if err := checkString(s, c); err != nil {
			return err
		}
	}
	for _, c := range []string{ColArrivalUS, ColDelayUS, ColInputTokens, ColOutputTokens, ColPriority, ColLoopIteration, ColRecordedTTFTUS, ColRecordedE2EUS, ColRecordedITLUS, ColSourceRow, ColTimeoutUS, ColNumImages} {
		if err := checkInt(s, c); err != nil {
			return err
		}
	}
	if err := checkBool(s, ColStreaming); err != nil {
		return err
	}
	if err := checkList(s, ColDependsOn, arrow.STRING); err != nil {
		return err
	}
	return checkList(s, ColPrefixHashes, arrow.UINT64, arrow.INT64)
}

func (c *requestCols) bind(rec arrow.RecordBatch) {
	c.id.bind(rec, ColRequestID)
	c.kind.bind(rec, ColKind)
	c.session.bind(rec, ColSessionID)
	c.tenant.bind(rec, ColTenantID)
	c.slo.bind(rec, ColSLOClass)
	c.model.bind(rec, ColModel)
	c.step.bind(rec, ColStepID)
	c.srcStatus.bind(rec, ColSourceStatus)
	c.arrival.bind(rec, ColArrivalUS)
	c.delay.bind(rec, ColDelayUS)
	c.in.bind(rec, ColInputTokens)
	c.out.bind(rec, ColOutputTokens)
	c.prio.bind(rec, ColPriority)
	c.loop.bind(rec, ColLoopIteration)
	c.rTTFT.bind(rec, ColRecordedTTFTUS)
	c.rE2E.bind(rec, ColRecordedE2EUS)
	c.rITL.bind(rec, ColRecordedITLUS)
	c.srcRow.bind(rec, ColSourceRow)
	c.timeout.bind(rec, ColTimeoutUS)
	c.rtype.bind(rec, ColRequestType)
	c.images.bind(rec, ColNumImages)
	c.stage.bind(rec, ColStage)
	c.lora.bind(rec, ColLoRA)
	c.stream.bind(rec, ColStreaming)
	c.deps.bind(rec, ColDependsOn)
	c.hashes.bind(rec, ColPrefixHashes)
}

func i32(c *intCol, i int, col string) (int32, error) {
	v, _ := c.get(i)
	if v > math.MaxInt32 || v < math.MinInt32 {
		return 0, fmt.Errorf("column %s: expected a 32-bit integer, found %d", col, v)
	}
	return int32(v), nil
}

func nullable(c *intCol, i int) int64 {
	if v, ok := c.get(i); ok {
		return v
	}
	return Null
}

// decode fills r from row i and validates it.
func (c *requestCols) decode(i int, r *Request) error {
	*r = Request{
		ID: c.id.get(i), Kind: c.kind.get(i), SessionID: c.session.get(i),
		TenantID: c.tenant.get(i), SLOClass: c.slo.get(i), Model: c.model.get(i),
		StepID: c.step.get(i), SourceStatus: c.srcStatus.get(i), RequestType: c.rtype.get(i),
		Stage: c.stage.get(i), LoRA: c.lora.get(i),
		ArrivalUS: nullable(&c.arrival, i), RecordedTTFTUS: nullable(&c.rTTFT, i),
		RecordedE2EUS: nullable(&c.rE2E, i), RecordedITLUS: nullable(&c.rITL, i),
		Streaming: c.stream.get(i, true), DependsOn: c.deps.get(i), PrefixHashes: c.hashes.get(i),
	}
	if r.Kind == "" {
		r.Kind = KindLLM
	}
	r.DelayUS, _ = c.delay.get(i)
	r.SourceRow, _ = c.srcRow.get(i)
	if v, ok := c.timeout.get(i); ok {
		if v <= 0 {
			return fmt.Errorf("column %s: expected > 0 (or null for no timeout), found %d", ColTimeoutUS, v)
		}
		r.TimeoutUS = v
	}
	var err error
	if r.InputTokens, err = i32(&c.in, i, ColInputTokens); err != nil {
		return err
	}
	if r.OutputTokens, err = i32(&c.out, i, ColOutputTokens); err != nil {
		return err
	}
	if r.Priority, err = i32(&c.prio, i, ColPriority); err != nil {
		return err
	}
	if r.LoopIteration, err = i32(&c.loop, i, ColLoopIteration); err != nil {
		return err
	}
	if r.NumImages, err = i32(&c.images, i, ColNumImages); err != nil {
		return err
	}
	return r.Validate()
}

// RequestReader decodes a requests table a slice of rows at a time.
type RequestReader struct {
	src  *Source
	cols requestCols
	row  int64
	// The next row to decode of the batch bound to cols (valid until
	// the next src.Next), and its rows.
	pos, of int
}

// decodeRows bounds the rows Next decodes at once: a batch of BatchRows
// decoded whole is 10 MB of Request values, which blis-sim's peak memory
// and caches paid for; this many stay in the processor's cache.
const decodeRows = 1024

// NewRequestReader checks that src holds a requests table (or at least its
// required columns) and returns a reader over it. A results table is read
// as the requests it starts with: a recorded run (blis-load's, whose
// recorded_* columns hold what it measured) replays as a requests table.
func NewRequestReader(src *Source) (*RequestReader, error) {
	if src.Meta().Table() != TableResults {
		if err := src.Expect(TableRequests); err != nil {
			return nil, err
		}
	}
	if err := checkRequestSchema(src.Schema()); err != nil {
		return nil, &InputError{Err: fmt.Errorf("%s: %w", src.Path, err)}
	}
	src.recycleBodies() // every value is copied out of a batch (see decode)
	return &RequestReader{src: src}, nil
}

// Next decodes the next rows into buf (reusing its storage) and returns
// them, or io.EOF after the last row. A bad row stops decoding with a
// *RowError.
func (r *RequestReader) Next(buf []Request) ([]Request, error) {
	if r.pos >= r.of {
		rec, err := r.src.Next()
		if err != nil {
			r.pos, r.of = 0, 0
			return buf[:0], err
		}
		r.cols.bind(rec)
		r.pos, r.of = 0, int(rec.NumRows())
	}
	n := min(r.of-r.pos, decodeRows)
	if cap(buf) < n {
		buf = make([]Request, n)
	}
	buf = buf[:n]
	for i := range buf {
		r.row++
		if err := r.cols.decode(r.pos+i, &buf[i]); err != nil {
			r.pos = r.of // a bad row ends the table
			return buf[:i], &RowError{Path: r.src.Path, Row: r.row, RequestID: buf[i].ID, SourceRow: buf[i].SourceRow, Err: err}
		}
	}
	r.pos += n
	return buf, nil
}

// RowsValidated says every row Next returns has passed Request.Validate.
func (r *RequestReader) RowsValidated() bool { return true }

// ReadAllRequests reads a whole requests table into memory: for tests and
// small inputs only; the simulator streams.
func ReadAllRequests(src *Source) ([]Request, error) {
	rr, err := NewRequestReader(src)
	if err != nil {
		return nil, err
	}
	return readAll(rr.Next)
}

// readAll drains a typed batch reader.
func readAll[T any](next func([]T) ([]T, error)) ([]T, error) {
	var all, buf []T
	for {
		var err error
		buf, err = next(buf)
		all = append(all, buf...)
		if err == io.EOF {
			return all, nil
		}
		if err != nil {
			return all, err
		}
	}
}
