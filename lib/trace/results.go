package trace

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Result is one row of the results table: the request as it was read, then
// what happened to it. Time fields are absolute simulated microseconds and
// hold Null when the request never reached that point.
type Result struct {
	Request
	Status           string
	DropReason       string // why a request was dropped or rejected ("" otherwise)
	InstanceID       int32  // -1 when never routed
	AdmittedUS       int64  // passed admission control
	RoutedUS         int64  // assigned to an instance
	EnqueuedUS       int64  // entered the instance's waiting queue (after alpha overhead)
	FirstScheduledUS int64  // first step that worked on it began
	FirstTokenUS     int64  // first output token emitted
	FinishedUS       int64  // last output token emitted (or tool timer fired)
	TTFTUS           int64  // FirstTokenUS - arrival
	E2EUS            int64  // FinishedUS - arrival
	TPOTUS           int64  // mean gap between output tokens after the first
	Preemptions      int32
	CachedTokens     int32  // prompt tokens served from the prefix cache on first scheduling
	GeneratedTokens  int32  // output tokens emitted (equals OutputTokens when completed)
	Deployment       string // the deployment that served it ("" when never routed)
	ReplicaID        string // "<deployment>/<n>" ("" when never routed)

	// Tiered KV: cached_tokens split by the tier the hit came from, the
	// time spent loading from lower tiers, and reloaded tokens whose blocks
	// were thrashing (reloaded, evicted and reloaded within 1 s).
	CachedTokensGPU, CachedTokensCPU, CachedTokensStorage int32
	KVReloadUS                                            int64
	KVThrashTokens                                        int32
	// Disaggregated serving ("" and Null otherwise): where it prefilled and
	// decoded, the hand-off's time (prefill end to the last KV byte's
	// arrival: with granularity chunk or stream, the part of the transfer
	// not hidden behind the prefill), the part of it spent waiting (decode
	// blocks, link queue) before the last piece was sent, and the bytes moved.
	PrefillReplica, DecodeReplica  string
	KVTransferUS, KVTransferWaitUS int64
	KVTransferBytes                int64
	// ClientWaitUS is how long the request waited for one of the client's
	// in-flight slots (blis.max_in_flight) after its time had come; its
	// arrival_us is when it was sent. Null when the client has no cap.
	ClientWaitUS int64
}

// NewResult returns a result for req with every outcome field absent.
func NewResult(req Request) Result {
	return Result{Request: req, InstanceID: -1, AdmittedUS: Null, RoutedUS: Null, EnqueuedUS: Null,
		FirstScheduledUS: Null, FirstTokenUS: Null, FinishedUS: Null, TTFTUS: Null, E2EUS: Null, TPOTUS: Null,
		KVTransferUS: Null, KVTransferWaitUS: Null, ClientWaitUS: Null}
}

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
	return w
}

// Write appends one result.
func (w *ResultWriter) Write(r *Result) error {
	w.rb.append(&r.Request)
	w.status.append(r.Status)
	w.reason.append(r.DropReason)
	if r.InstanceID < 0 {
		w.inst.AppendNull()
	} else {
		w.inst.Append(r.InstanceID)
	}
	appendNullable64(w.adm, r.AdmittedUS)
	appendNullable64(w.routed, r.RoutedUS)
	appendNullable64(w.enq, r.EnqueuedUS)
	appendNullable64(w.sched, r.FirstScheduledUS)
	appendNullable64(w.first, r.FirstTokenUS)
	appendNullable64(w.fin, r.FinishedUS)
	appendNullable64(w.ttft, r.TTFTUS)
	appendNullable64(w.e2e, r.E2EUS)
	appendNullable64(w.tpot, r.TPOTUS)
	w.preempt.Append(r.Preemptions)
	w.cached.Append(r.CachedTokens)
	w.generated.Append(r.GeneratedTokens)
	w.deployment.append(r.Deployment)
	w.replica.append(r.ReplicaID)
	if r.CachedTokensCPU == 0 && r.CachedTokensStorage == 0 && r.KVReloadUS == 0 && r.KVThrashTokens == 0 &&
		r.PrefillReplica == "" && r.DecodeReplica == "" && r.KVTransferUS == Null && r.KVTransferWaitUS == Null && r.KVTransferBytes == 0 && r.ClientWaitUS == Null {
		w.pendGPU = append(w.pendGPU, r.CachedTokensGPU)
		if w.n+1 >= BatchRows {
			w.fillPending()
		}
		return w.added()
	}
	w.fillPending()
	w.tierTok[0].Append(r.CachedTokensGPU)
	w.tierTok[1].Append(r.CachedTokensCPU)
	w.tierTok[2].Append(r.CachedTokensStorage)
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
	w.reload.AppendEmptyValues(n)
	w.xferBytes.AppendEmptyValues(n)
	w.xfer.AppendNulls(n)
	w.xferWait.AppendNulls(n)
	w.clientWait.AppendNulls(n)
	w.pre.appendNulls(n)
	w.dec.appendNulls(n)
	w.pendGPU = w.pendGPU[:0]
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
	src  *Source
	cols resultCols
	row  int64
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
	return &ResultReader{src: src}, nil
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
		x.CachedTokensGPU, x.CachedTokensCPU, x.CachedTokensStorage, x.KVThrashTokens = int32(tt[0]), int32(tt[1]), int32(tt[2]), int32(tt[3])
		x.KVReloadUS, _ = r.cols.reload.get(i)
		x.KVTransferUS, x.KVTransferWaitUS = nullable(&r.cols.xfer, i), nullable(&r.cols.xferWait, i)
		x.KVTransferBytes, _ = r.cols.xferBytes.get(i)
		x.ClientWaitUS = nullable(&r.cols.clientWait, i)
	}
	return buf, nil
}

// ReadAllResults reads a whole results table: for tests and small inputs.
func ReadAllResults(src *Source) ([]Result, error) {
	rr, err := NewResultReader(src)
	if err != nil {
		return nil, err
	}
	return readAll(rr.Next)
}

// Step is one row of the steps table: one engine iteration on one instance.
type Step struct {
	InstanceID    int32
	StepIndex     int64
	StartUS       int64
	DurationUS    int64
	BatchSize     int32
	PrefillTokens int32
	DecodeTokens  int32
	KVBlocksUsed  int32
	KVBlocksTotal int32
	Waiting       int32
	Running       int32
	Preempted     int32 // requests preempted while forming this step
	ReplicaID     string
	Role          string // the replica's pool role: monolithic, prefill or decode
	// Lower KV tiers: blocks copied into a lower tier, and loaded from
	// one to the GPU, on this instance since its previous step row.
	KVOffloads, KVReloads int32
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
