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
}

// NewResult returns a result for req with every outcome field absent.
func NewResult(req Request) Result {
	return Result{Request: req, InstanceID: -1, AdmittedUS: Null, RoutedUS: Null, EnqueuedUS: Null,
		FirstScheduledUS: Null, FirstTokenUS: Null, FinishedUS: Null, TTFTUS: Null, E2EUS: Null, TPOTUS: Null}
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
	return w.added()
}

// Rows returns the number of rows written so far.
func (w *ResultWriter) Rows() int64 { return w.rows }

// Close flushes the last batch and closes the sink.
func (w *ResultWriter) Close() error { return w.close() }

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
}

func (c *resultCols) bind(rec arrow.RecordBatch) {
	c.req.bind(rec)
	c.status.bind(rec, ColStatus)
	c.reason.bind(rec, ColDropReason)
	c.deployment.bind(rec, ColDeployment)
	c.replica.bind(rec, ColReplicaID)
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
}

// StepWriter writes Step rows in batches.
type StepWriter struct {
	batchWriter
	i32     [10]*array.Int32Builder
	i64     [3]*array.Int64Builder
	replica *dictCol
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
	return w.added()
}

// Close flushes the last batch and closes the sink.
func (w *StepWriter) Close() error { return w.close() }

// Abort ends the output of a failed run: a file is removed (an earlier one
// at the path stays), a stream is left without its end-of-stream marker.
func (w *StepWriter) Abort() { w.abort() }
