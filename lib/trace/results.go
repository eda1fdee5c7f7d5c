package trace

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ResultWriter writes Result rows in batches.
type ResultWriter struct {
	batchWriter
	rb                                                   requestBuilder
	status, reason                                       *dictCol
	inst                                                 *array.Int32Builder
	adm, routed, enq, sched, first, fin, ttft, e2e, tpot *array.Int64Builder
	preempt, cached, generated                           *array.Int32Builder
	deployment, replica                                  *dictCol
	tierTok                                              [4]*array.Int32Builder // gpu, cpu, storage, thrash
	extra                                                []*array.Int32Builder  // lower tiers beyond cpu and storage
	reload, xfer, xferWait, xferBytes                    *array.Int64Builder
	clientWait                                           *array.Int64Builder
	pre, dec                                             *dictCol
	// Rows whose tiered-KV and P/D columns hold their defaults (no tiers,
	// no P/D: every row of most runs) are appended in bulk when the batch
	// is flushed or a row with values comes: pendGPU keeps their
	// cached_tokens_gpu (= cached_tokens).
	pendGPU []int32
}

// NewResultWriter writes results to sink, created with ResultsSchema(md).
func NewResultWriter(sink Sink, schema *arrow.Schema) *ResultWriter {
	bw := newBatchWriter(sink, schema)
	b := bw.b
	n := len(requestFields)
	f := func(i int) array.Builder { return b.Field(n + i) }
	w := &ResultWriter{
		batchWriter: bw,
		status:      bw.dicts[n], reason: bw.dicts[n+1],
		inst: f(2).(*array.Int32Builder), adm: f(3).(*array.Int64Builder), routed: f(4).(*array.Int64Builder),
		enq: f(5).(*array.Int64Builder), sched: f(6).(*array.Int64Builder), first: f(7).(*array.Int64Builder),
		fin: f(8).(*array.Int64Builder), ttft: f(9).(*array.Int64Builder), e2e: f(10).(*array.Int64Builder),
		tpot: f(11).(*array.Int64Builder), preempt: f(12).(*array.Int32Builder),
		cached: f(13).(*array.Int32Builder), generated: f(14).(*array.Int32Builder),
		deployment: bw.dicts[n+15], replica: bw.dicts[n+16],
		tierTok: [4]*array.Int32Builder{f(17).(*array.Int32Builder), f(18).(*array.Int32Builder), f(19).(*array.Int32Builder), f(21).(*array.Int32Builder)},
		reload:  f(20).(*array.Int64Builder), pre: bw.dicts[n+22], dec: bw.dicts[n+23],
		xfer: f(24).(*array.Int64Builder), xferWait: f(25).(*array.Int64Builder), xferBytes: f(26).(*array.Int64Builder),
		clientWait: f(27).(*array.Int64Builder),
	}
	w.rb = newRequestBuilder(&w.batchWriter)
	if md, err := MetaFromSchema(schema); err == nil {
		if names, err := md.KVTiers(); err == nil {
			for _, n := range extraTiers(names) {
				if i := colIndex(schema, TierColumn(n)); i >= 0 {
					w.extra = append(w.extra, b.Field(i).(*array.Int32Builder))
				}
			}
		}
	}
	return w
}

// Write appends one result.
func (w *ResultWriter) Write(r *Result) error {
	w.rb.put(&r.Request)
	w.status.append(r.Status)
	w.reason.append(r.DropReason)
	if r.InstanceID < 0 {
		w.inst.UnsafeAppendBoolToBitmap(false)
	} else {
		put32(w.inst, r.InstanceID)
	}
	put64(w.adm, r.AdmittedUS)
	put64(w.routed, r.RoutedUS)
	put64(w.enq, r.EnqueuedUS)
	put64(w.sched, r.FirstScheduledUS)
	put64(w.first, r.FirstTokenUS)
	put64(w.fin, r.FinishedUS)
	put64(w.ttft, r.TTFTUS)
	put64(w.e2e, r.E2EUS)
	put64(w.tpot, r.TPOTUS)
	put32(w.preempt, r.Preemptions)
	put32(w.cached, r.CachedTokens)
	put32(w.generated, r.GeneratedTokens)
	w.deployment.append(r.Deployment)
	w.replica.append(r.ReplicaID)
	if allZero(r.CachedTokensTier) && r.KVReloadUS == 0 && r.KVThrashTokens == 0 &&
		r.PrefillReplica == "" && r.DecodeReplica == "" && r.KVTransferUS == Null && r.KVTransferWaitUS == Null && r.KVTransferBytes == 0 && r.ClientWaitUS == Null {
		w.pendGPU = append(w.pendGPU, r.CachedTokensGPU)
		if w.n+1 >= BatchRows {
			w.fillPending()
		}
		return w.added()
	}
	w.fillPending()
	w.tierTok[0].Append(r.CachedTokensGPU)
	w.tierTok[1].Append(tierAt(r.CachedTokensTier, 0))
	w.tierTok[2].Append(tierAt(r.CachedTokensTier, 1))
	for i, b := range w.extra {
		b.Append(tierAt(r.CachedTokensTier, len(FixedTiers)+i))
	}
	w.reload.Append(r.KVReloadUS)
	w.tierTok[3].Append(r.KVThrashTokens)
	w.pre.append(r.PrefillReplica)
	w.dec.append(r.DecodeReplica)
	appendNullable64(w.xfer, r.KVTransferUS)
	appendNullable64(w.xferWait, r.KVTransferWaitUS)
	w.xferBytes.Append(r.KVTransferBytes)
	appendNullable64(w.clientWait, r.ClientWaitUS)
	return w.added()
}

// fillPending appends the default-valued rows held back by Write.
func (w *ResultWriter) fillPending() {
	n := len(w.pendGPU)
	if n == 0 {
		return
	}
	w.tierTok[0].AppendValues(w.pendGPU, nil)
	for _, b := range []*array.Int32Builder{w.tierTok[1], w.tierTok[2], w.tierTok[3]} {
		b.AppendEmptyValues(n)
	}
	for _, b := range w.extra {
		b.AppendEmptyValues(n)
	}
	w.reload.AppendEmptyValues(n)
	w.xferBytes.AppendEmptyValues(n)
	w.xfer.AppendNulls(n)
	w.xferWait.AppendNulls(n)
	w.clientWait.AppendNulls(n)
	w.pre.appendNulls(n)
	w.dec.appendNulls(n)
	w.pendGPU = w.pendGPU[:0]
}

func allZero(xs []int32) bool {
	for _, x := range xs {
		if x != 0 {
			return false
		}
	}
	return true
}

// tierAt is xs[i], 0 past its end.
func tierAt(xs []int32, i int) int32 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

// Rows returns the number of rows written so far.
func (w *ResultWriter) Rows() int64 { return w.rows }

// Close flushes the last batch and closes the sink.
func (w *ResultWriter) Close() error {
	w.fillPending()
	return w.close()
}

// Abort ends the output of a failed run: a file is removed (an earlier one
// at the path stays), a stream is left without its end-of-stream marker.
func (w *ResultWriter) Abort() { w.abort() }

// RequiredResultColumns must be present in any table read as results.
var RequiredResultColumns = []string{ColRequestID, ColStatus}

type resultCols struct {
	req                                                  requestCols
	status, reason, deployment, replica                  strCol
	inst, adm, routed, enq, sched, first, fin, ttft, e2e intCol
	tpot, preempt, cached, generated                     intCol
	pre, dec                                             strCol
	tierTok                                              [4]intCol
	extra                                                []intCol // lower tiers beyond cpu and storage
	extraNames                                           []string // their columns
	reload, xfer, xferWait, xferBytes                    intCol
	clientWait                                           intCol
}

func (c *resultCols) bind(rec arrow.RecordBatch) {
	c.req.bind(rec)
	c.status.bind(rec, ColStatus)
	c.reason.bind(rec, ColDropReason)
	c.deployment.bind(rec, ColDeployment)
	c.replica.bind(rec, ColReplicaID)
	c.pre.bind(rec, ColPrefillReplica)
	c.dec.bind(rec, ColDecodeReplica)
	for _, x := range []struct {
		c    *intCol
		name string
	}{{&c.tierTok[0], ColCachedTokensGPU}, {&c.tierTok[1], ColCachedTokensCPU}, {&c.tierTok[2], ColCachedTokensStorage},
		{&c.tierTok[3], ColKVThrashTokens}, {&c.reload, ColKVReloadUS}, {&c.xfer, ColKVTransferUS},
		{&c.xferWait, ColKVTransferWaitUS}, {&c.xferBytes, ColKVTransferBytes}, {&c.clientWait, ColClientWaitUS}} {
		x.c.bind(rec, x.name)
	}
	for i := range c.extra {
		c.extra[i].bind(rec, c.extraNames[i])
	}
	for _, x := range []struct {
		c    *intCol
		name string
	}{{&c.inst, ColInstanceID}, {&c.adm, ColAdmittedUS}, {&c.routed, ColRoutedUS}, {&c.enq, ColEnqueuedUS},
		{&c.sched, ColFirstScheduledUS}, {&c.first, ColFirstTokenUS}, {&c.fin, ColFinishedUS}, {&c.ttft, ColTTFTUS},
		{&c.e2e, ColE2EUS}, {&c.tpot, ColTPOTUS}, {&c.preempt, ColPreemptions}, {&c.cached, ColCachedTokens},
		{&c.generated, ColGeneratedTokens}} {
		x.c.bind(rec, x.name)
	}
}

// ResultReader decodes a results table batch by batch. For large tables
// prefer reading the columns you need directly from Source batches.
type ResultReader struct {
	src   *Source
	cols  resultCols
	row   int64
	tiers int     // lower tiers (cpu, storage and the run's others)
	tok   []int32 // the batch's CachedTokensTier values
}

// NewResultReader checks src is a results table and returns a reader.
func NewResultReader(src *Source) (*ResultReader, error) {
	if err := src.Expect(TableResults); err != nil {
		return nil, err
	}
	for _, c := range RequiredResultColumns {
		if colIndex(src.Schema(), c) < 0 {
			return nil, &InputError{Err: fmt.Errorf("%s: not a results table: missing column %s", src.Path, c)}
		}
	}
	if err := checkRequestSchema(src.Schema()); err != nil {
		return nil, &InputError{Err: fmt.Errorf("%s: %w", src.Path, err)}
	}
	r := &ResultReader{src: src}
	names, err := src.Meta().KVTiers()
	if err != nil {
		return nil, &InputError{Err: fmt.Errorf("%s: %w", src.Path, err)}
	}
	for _, n := range extraTiers(names) {
		r.cols.extra = append(r.cols.extra, intCol{})
		r.cols.extraNames = append(r.cols.extraNames, TierColumn(n))
	}
	r.tiers = len(names)
	return r, nil
}

// Next decodes the next batch into buf, or returns io.EOF.
func (r *ResultReader) Next(buf []Result) ([]Result, error) {
	rec, err := r.src.Next()
	if err != nil {
		return buf[:0], err
	}
	r.cols.bind(rec)
	n := int(rec.NumRows())
	if cap(buf) < n {
		buf = make([]Result, n)
	}
	buf = buf[:n]
	r.tok = nil // a new backing array per batch: rows kept by the caller keep their values
	for i := 0; i < n; i++ {
		r.row++
		x := &buf[i]
		if err := r.cols.req.decode(i, &x.Request); err != nil {
			return buf[:i], &RowError{Path: r.src.Path, Row: r.row, RequestID: x.ID, SourceRow: x.SourceRow, Err: err}
		}
		x.Status, x.DropReason = r.cols.status.get(i), r.cols.reason.get(i)
		x.Deployment, x.ReplicaID = r.cols.deployment.get(i), r.cols.replica.get(i)
		inst, ok := r.cols.inst.get(i)
		if !ok {
			inst = -1
		}
		x.InstanceID = int32(inst)
		x.AdmittedUS, x.RoutedUS, x.EnqueuedUS = nullable(&r.cols.adm, i), nullable(&r.cols.routed, i), nullable(&r.cols.enq, i)
		x.FirstScheduledUS, x.FirstTokenUS, x.FinishedUS = nullable(&r.cols.sched, i), nullable(&r.cols.first, i), nullable(&r.cols.fin, i)
		x.TTFTUS, x.E2EUS, x.TPOTUS = nullable(&r.cols.ttft, i), nullable(&r.cols.e2e, i), nullable(&r.cols.tpot, i)
		p, _ := r.cols.preempt.get(i)
		c, _ := r.cols.cached.get(i)
		g, _ := r.cols.generated.get(i)
		x.Preemptions, x.CachedTokens, x.GeneratedTokens = int32(p), int32(c), int32(g)
		x.PrefillReplica, x.DecodeReplica = r.cols.pre.get(i), r.cols.dec.get(i)
		var tt [4]int64
		for k := range tt {
			tt[k], _ = r.cols.tierTok[k].get(i)
		}
		x.CachedTokensGPU, x.KVThrashTokens = int32(tt[0]), int32(tt[3])
		x.CachedTokensTier = nil
		if tt[1] != 0 || tt[2] != 0 || r.anyExtra(i) {
			k := len(r.tok)
			r.tok = append(r.tok, int32(tt[1]), int32(tt[2]))
			for e := range r.cols.extra {
				v, _ := r.cols.extra[e].get(i)
				r.tok = append(r.tok, int32(v))
			}
			x.CachedTokensTier = r.tok[k:len(r.tok):len(r.tok)]
		}
		x.KVReloadUS, _ = r.cols.reload.get(i)
		x.KVTransferUS, x.KVTransferWaitUS = nullable(&r.cols.xfer, i), nullable(&r.cols.xferWait, i)
		x.KVTransferBytes, _ = r.cols.xferBytes.get(i)
		x.ClientWaitUS = nullable(&r.cols.clientWait, i)
	}
	return buf, nil
}

func (r *ResultReader) anyExtra(i int) bool {
	for e := range r.cols.extra {
		if v, _ := r.cols.extra[e].get(i); v != 0 {
			return true
		}
	}
	return false
}

// ReadAllResults reads a whole results table: for tests and small inputs.
func ReadAllResults(src *Source) ([]Result, error) {
	rr, err := NewResultReader(src)
	if err != nil {
		return nil, err
	}
	return readAll(rr.Next)
}

// StepWriter writes Step rows in batches.
type StepWriter struct {
	batchWriter
	i32     [10]*array.Int32Builder
	i64     [3]*array.Int64Builder
	replica *dictCol
	role    *dictCol
	tiers   [2]*array.Int32Builder
}

// NewStepWriter writes steps to sink, created with StepsSchema(md).
func NewStepWriter(sink Sink, schema *arrow.Schema) *StepWriter {
	w := &StepWriter{batchWriter: newBatchWriter(sink, schema)}
	b := w.b
	w.i32[0] = b.Field(0).(*array.Int32Builder)
	w.i64[0], w.i64[1], w.i64[2] = b.Field(1).(*array.Int64Builder), b.Field(2).(*array.Int64Builder), b.Field(3).(*array.Int64Builder)
	for i := 4; i < 12; i++ {
		w.i32[i-3] = b.Field(i).(*array.Int32Builder)
	}
	w.replica = w.dicts[12]
	w.role = w.dicts[13]
	w.tiers[0], w.tiers[1] = b.Field(14).(*array.Int32Builder), b.Field(15).(*array.Int32Builder)
	return w
}

// Write appends one step.
func (w *StepWriter) Write(s *Step) error {
	w.i32[0].Append(s.InstanceID)
	w.i64[0].Append(s.StepIndex)
	w.i64[1].Append(s.StartUS)
	w.i64[2].Append(s.DurationUS)
	for i, v := range [...]int32{s.BatchSize, s.PrefillTokens, s.DecodeTokens, s.KVBlocksUsed, s.KVBlocksTotal, s.Waiting, s.Running, s.Preempted} {
		w.i32[i+1].Append(v)
	}
	w.replica.append(s.ReplicaID)
	w.role.append(s.Role)
	w.tiers[0].Append(s.KVOffloads)
	w.tiers[1].Append(s.KVReloads)
	return w.added()
}

// Close flushes the last batch and closes the sink.
func (w *StepWriter) Close() error { return w.close() }

// Abort ends the output of a failed run: a file is removed (an earlier one
// at the path stays), a stream is left without its end-of-stream marker.
func (w *StepWriter) Abort() { w.abort() }
