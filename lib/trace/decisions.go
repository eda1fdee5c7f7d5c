package trace

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Decision trace and anomaly tables (docs/tables.md): written by blis-sim
// --decisions / --anomalies and read by blis-report --summary.
const (
	TableDecisions = "decisions"
	TableAnomalies = "anomalies"
)

// NullI32 marks an absent int32 value in the decision and anomaly tables;
// a NaN float64 is absent too, and so is an empty string.
const NullI32 int32 = math.MinInt32

// Decision kinds (the kind column).
const (
	DecisionAdmission  = "admission"
	DecisionPriority   = "priority"
	DecisionRouting    = "routing"
	DecisionBatch      = "batch"
	DecisionPreemption = "preemption"
	DecisionScale      = "scale"        // emitted by autoscaling (issue 14)
	DecisionKVTransfer = "kv_transfer"  // emitted by prefill/decode disaggregation (issue 13)
	DecisionFlow       = "flow_control" // emitted by the gateway's flow control (issue 31)
	// Emitted by disaggregated serving (issue 31): the P/D decider's
	// choice (disaggregate or local), the decode replica's pick, and an
	// encode replica's pick.
	DecisionPD            = "pd"
	DecisionDecodeRouting = "decode_routing"
	DecisionEncodeRouting = "encode_routing"
)

// DecisionKinds lists every kind, in documentation order.
var DecisionKinds = []string{DecisionAdmission, DecisionPriority, DecisionRouting, DecisionBatch,
	DecisionPreemption, DecisionScale, DecisionKVTransfer, DecisionFlow, DecisionPD, DecisionDecodeRouting, DecisionEncodeRouting}

// Candidate is one of a routing decision's top-k candidates with what the
// policy saw of it, and, for a decision sampled for counterfactual regret,
// the outcome of forcing it.
type Candidate struct {
	ReplicaID    string
	Score        float64 // NaN when the policy did not score
	Waiting      int32
	Running      int32
	InFlight     int32
	KVUtil       float64
	CachedBlocks int32
	// Counterfactual replay (NullI32/Null/NaN unless sampled): the
	// request's TTFT and the window's mean TTFT with this candidate forced
	// (the window: the requests on the candidate replicas without a first
	// token at the decision, and the request; docs/evaluator.md).
	CFTTFTUS       int64
	CFWindowTTFTUS float64
}

// Decision is one row of the decisions table.
type Decision struct {
	Seq       int64 // decision order (rows are written when complete: routing rows once the request's outcome is known)
	TimeUS    int64
	Kind      string
	RequestID string
	TenantID  string
	SLOClass  string
	Target    string // chosen replica ("" for admission and priority)
	Action    string // admit|reject|delay, route, preempt, form, …
	Reason    string
	Value     int64 // priority, delay_us, batch size, …; Null when none

	// What the policy saw of the target (NullI32 / NaN when none).
	Waiting, Running, InFlight int32
	KVUtil                     float64
	CachedBlocks, PromptBlocks int32
	Candidates                 []Candidate

	// Routing outcome.
	ExpectedCacheHitTokens int32  // the router's shadow KV model's prediction
	CacheHitTokens         int32  // prompt tokens actually served from cache on first scheduling
	HitTier                string // tiers the hit came from, top down, "+"-joined (gpu, cpu, gpu+cpu, …), or none
	TTFTUS                 int64
	Status                 string // the request's final status
	RegretUS               int64  // counterfactual: chosen TTFT − best alternative's (sampled rows)
	WindowRegretUS         float64

	// Score is a priority row's priority (a score, larger runs first);
	// NaN on other rows.
	Score float64
	// Filtered are the candidates a routing policy filtered out, with why
	// (ClusterView.Filter); nil when it filtered none.
	Filtered []Filtered
}

// Filtered is a candidate a routing policy ruled out, and why.
type Filtered struct {
	ReplicaID, Reason string
}

// Reset empties d for reuse, with every optional field absent.
func (d *Decision) Reset() {
	*d = Decision{Value: Null, Waiting: NullI32, Running: NullI32, InFlight: NullI32, KVUtil: math.NaN(),
		CachedBlocks: NullI32, PromptBlocks: NullI32, ExpectedCacheHitTokens: NullI32, CacheHitTokens: NullI32,
		TTFTUS: Null, RegretUS: Null, WindowRegretUS: math.NaN(), Score: math.NaN(), Candidates: d.Candidates[:0],
		Filtered: d.Filtered[:0]}
}

var dictStr = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

var candidateType = arrow.StructOf(
	arrow.Field{Name: "replica_id", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	arrow.Field{Name: "waiting", Type: arrow.PrimitiveTypes.Int32},
	arrow.Field{Name: "running", Type: arrow.PrimitiveTypes.Int32},
	arrow.Field{Name: "in_flight", Type: arrow.PrimitiveTypes.Int32},
	arrow.Field{Name: "kv_util", Type: arrow.PrimitiveTypes.Float64},
	arrow.Field{Name: "cached_blocks", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	arrow.Field{Name: "cf_ttft_us", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	arrow.Field{Name: "cf_window_ttft_us", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
)

var decisionFields = []arrow.Field{
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "time_us", Type: arrow.PrimitiveTypes.Int64},
	{Name: "kind", Type: dictStr},
	{Name: "request_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "tenant_id", Type: dictStr, Nullable: true},
	{Name: "slo_class", Type: dictStr, Nullable: true},
	{Name: "target", Type: dictStr, Nullable: true},
	{Name: "action", Type: dictStr},
	{Name: "reason", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "waiting", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "running", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "in_flight", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "kv_util", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "cached_blocks", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "prompt_blocks", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "candidates", Type: arrow.ListOf(candidateType), Nullable: true},
	{Name: "expected_cache_hit_tokens", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "cache_hit_tokens", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "hit_tier", Type: dictStr, Nullable: true},
	{Name: "ttft_us", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "status", Type: dictStr, Nullable: true},
	{Name: "regret_us", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "window_regret_us", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "filtered", Type: arrow.ListOf(filteredType), Nullable: true},
}

var filteredType = arrow.StructOf(
	arrow.Field{Name: "replica_id", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "reason", Type: arrow.BinaryTypes.String},
)

// DecisionsSchema returns the decisions table schema.
func DecisionsSchema(md Meta) *arrow.Schema {
	return arrow.NewSchema(decisionFields, md.arrow(TableDecisions))
}

// DecisionWriter writes Decision rows in batches.
type DecisionWriter struct {
	batchWriter
	seq, time, value, ttft, regret                       *array.Int64Builder
	req, reason                                          *array.StringBuilder
	kind, tenant, class, target, action, tier, status    *dictCol
	waiting, running, inflight, cached, prompt, exp, hit *array.Int32Builder
	kvu, wregret, score                                  *array.Float64Builder
	cands                                                *array.ListBuilder
	cs                                                   *array.StructBuilder
	cID                                                  *array.StringBuilder
	cScore, cKV, cWin                                    *array.Float64Builder
	cW, cR, cF, cCached                                  *array.Int32Builder
	cTTFT                                                *array.Int64Builder
	filt                                                 *array.ListBuilder
	fs                                                   *array.StructBuilder
	fID, fReason                                         *array.StringBuilder
}

// NewDecisionWriter writes decisions to sink, created with DecisionsSchema(md).
func NewDecisionWriter(sink Sink, schema *arrow.Schema) *DecisionWriter {
	w := &DecisionWriter{batchWriter: newBatchWriter(sink, schema)}
	f := w.b.Field
	w.seq, w.time = f(0).(*array.Int64Builder), f(1).(*array.Int64Builder)
	w.kind, w.req, w.tenant, w.class, w.target, w.action = w.dicts[2], f(3).(*array.StringBuilder), w.dicts[4], w.dicts[5], w.dicts[6], w.dicts[7]
	w.reason, w.value = f(8).(*array.StringBuilder), f(9).(*array.Int64Builder)
	w.waiting, w.running, w.inflight = f(10).(*array.Int32Builder), f(11).(*array.Int32Builder), f(12).(*array.Int32Builder)
	w.kvu, w.cached, w.prompt = f(13).(*array.Float64Builder), f(14).(*array.Int32Builder), f(15).(*array.Int32Builder)
	w.cands = f(16).(*array.ListBuilder)
	w.cs = w.cands.ValueBuilder().(*array.StructBuilder)
	w.cID, w.cScore = w.cs.FieldBuilder(0).(*array.StringBuilder), w.cs.FieldBuilder(1).(*array.Float64Builder)
	w.cW, w.cR, w.cF = w.cs.FieldBuilder(2).(*array.Int32Builder), w.cs.FieldBuilder(3).(*array.Int32Builder), w.cs.FieldBuilder(4).(*array.Int32Builder)
	w.cKV, w.cCached = w.cs.FieldBuilder(5).(*array.Float64Builder), w.cs.FieldBuilder(6).(*array.Int32Builder)
	w.cTTFT, w.cWin = w.cs.FieldBuilder(7).(*array.Int64Builder), w.cs.FieldBuilder(8).(*array.Float64Builder)
	w.exp, w.hit, w.tier = f(17).(*array.Int32Builder), f(18).(*array.Int32Builder), w.dicts[19]
	w.ttft, w.status, w.regret, w.wregret = f(20).(*array.Int64Builder), w.dicts[21], f(22).(*array.Int64Builder), f(23).(*array.Float64Builder)
	w.score, w.filt = f(24).(*array.Float64Builder), f(25).(*array.ListBuilder)
	w.fs = w.filt.ValueBuilder().(*array.StructBuilder)
	w.fID, w.fReason = w.fs.FieldBuilder(0).(*array.StringBuilder), w.fs.FieldBuilder(1).(*array.StringBuilder)
	return w
}

func putI64(b *array.Int64Builder, v int64) {
	if v == Null {
		b.AppendNull()
	} else {
		b.Append(v)
	}
}

func putI32(b *array.Int32Builder, v int32) {
	if v == NullI32 {
		b.AppendNull()
	} else {
		b.Append(v)
	}
}

func putF64(b *array.Float64Builder, v float64) {
	if math.IsNaN(v) {
		b.AppendNull()
	} else {
		b.Append(v)
	}
}

func putStr(b *array.StringBuilder, v string) {
	if v == "" {
		b.AppendNull()
	} else {
		b.Append(v)
	}
}

// Write appends one decision.
func (w *DecisionWriter) Write(d *Decision) error {
	w.seq.Append(d.Seq)
	w.time.Append(d.TimeUS)
	w.kind.append(d.Kind)
	putStr(w.req, d.RequestID)
	w.tenant.append(d.TenantID)
	w.class.append(d.SLOClass)
	w.target.append(d.Target)
	w.action.append(d.Action)
	putStr(w.reason, d.Reason)
	putI64(w.value, d.Value)
	putI32(w.waiting, d.Waiting)
	putI32(w.running, d.Running)
	putI32(w.inflight, d.InFlight)
	putF64(w.kvu, d.KVUtil)
	putI32(w.cached, d.CachedBlocks)
	putI32(w.prompt, d.PromptBlocks)
	if len(d.Candidates) == 0 {
		w.cands.AppendNull()
	} else {
		w.cands.Append(true)
		for i := range d.Candidates {
			c := &d.Candidates[i]
			w.cs.Append(true)
			w.cID.Append(c.ReplicaID)
			putF64(w.cScore, c.Score)
			w.cW.Append(c.Waiting)
			w.cR.Append(c.Running)
			w.cF.Append(c.InFlight)
			w.cKV.Append(c.KVUtil)
			putI32(w.cCached, c.CachedBlocks)
			putI64(w.cTTFT, c.CFTTFTUS)
			putF64(w.cWin, c.CFWindowTTFTUS)
		}
	}
	putI32(w.exp, d.ExpectedCacheHitTokens)
	putI32(w.hit, d.CacheHitTokens)
	w.tier.append(d.HitTier)
	putI64(w.ttft, d.TTFTUS)
	w.status.append(d.Status)
	putI64(w.regret, d.RegretUS)
	putF64(w.wregret, d.WindowRegretUS)
	putF64(w.score, d.Score)
	if len(d.Filtered) == 0 {
		w.filt.AppendNull()
	} else {
		w.filt.Append(true)
		for _, f := range d.Filtered {
			w.fs.Append(true)
			w.fID.Append(f.ReplicaID)
			w.fReason.Append(f.Reason)
		}
	}
	return w.added()
}

// Close flushes the last batch and closes the sink.
func (w *DecisionWriter) Close() error { return w.close() }

// Abort ends the output of a failed run.
func (w *DecisionWriter) Abort() { w.abort() }

var anomalyFields = []arrow.Field{
	{Name: "seq", Type: arrow.PrimitiveTypes.Int64},
	{Name: "type", Type: dictStr},
	{Name: "time_us", Type: arrow.PrimitiveTypes.Int64},
	{Name: "end_us", Type: arrow.PrimitiveTypes.Int64},
	{Name: "severity", Type: dictStr},
	{Name: "magnitude", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "replica_id", Type: dictStr, Nullable: true},
	{Name: "description", Type: arrow.BinaryTypes.String},
	{Name: "request_ids", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
}

// AnomaliesSchema returns the anomalies table schema.
func AnomaliesSchema(md Meta) *arrow.Schema {
	return arrow.NewSchema(anomalyFields, md.arrow(TableAnomalies))
}

// AnomalyWriter writes Anomaly rows in batches.
type AnomalyWriter struct {
	batchWriter
	seq, time, end *array.Int64Builder
	typ, sev, rep  *dictCol
	mag            *array.Float64Builder
	desc           *array.StringBuilder
	reqs           *array.ListBuilder
	reqv           *array.StringBuilder
}

// NewAnomalyWriter writes anomalies to sink, created with AnomaliesSchema(md).
func NewAnomalyWriter(sink Sink, schema *arrow.Schema) *AnomalyWriter {
	w := &AnomalyWriter{batchWriter: newBatchWriter(sink, schema)}
	f := w.b.Field
	w.seq, w.typ, w.time, w.end = f(0).(*array.Int64Builder), w.dicts[1], f(2).(*array.Int64Builder), f(3).(*array.Int64Builder)
	w.sev, w.mag, w.rep, w.desc = w.dicts[4], f(5).(*array.Float64Builder), w.dicts[6], f(7).(*array.StringBuilder)
	w.reqs = f(8).(*array.ListBuilder)
	w.reqv = w.reqs.ValueBuilder().(*array.StringBuilder)
	return w
}

// Write appends one anomaly.
func (w *AnomalyWriter) Write(a *Anomaly) error {
	w.seq.Append(a.Seq)
	w.typ.append(a.Type)
	w.time.Append(a.TimeUS)
	w.end.Append(a.EndUS)
	w.sev.append(a.Severity)
	putF64(w.mag, a.Magnitude)
	w.rep.append(a.ReplicaID)
	w.desc.Append(a.Description)
	if len(a.Requests) == 0 {
		w.reqs.AppendNull()
	} else {
		w.reqs.Append(true)
		for _, id := range a.Requests {
			w.reqv.Append(id)
		}
	}
	return w.added()
}

// Close flushes the last batch and closes the sink.
func (w *AnomalyWriter) Close() error { return w.close() }

// Abort ends the output of a failed run.
func (w *AnomalyWriter) Abort() { w.abort() }
