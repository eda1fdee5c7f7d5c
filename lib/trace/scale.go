package trace

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TableScaleEvents is the scale-events table (blis-sim --scale-events):
// one row per autoscaler decision and per replica lifecycle change.
const TableScaleEvents = "scale_events"

var scaleFields = []arrow.Field{
	field("time_us", arrow.PrimitiveTypes.Int64, false),
	field(ColDeployment, arrow.BinaryTypes.String, false),
	field("pool", arrow.PrimitiveTypes.Int32, false),
	field("action", arrow.BinaryTypes.String, false),
	field(ColReplicaID, arrow.BinaryTypes.String, true),
	field("from", arrow.PrimitiveTypes.Int32, true),
	field("to", arrow.PrimitiveTypes.Int32, true),
	field("reason", arrow.BinaryTypes.String, true),
	field("replicas", arrow.PrimitiveTypes.Int32, false),
	field("ready", arrow.PrimitiveTypes.Int32, false),
	field("gpus_per_replica", arrow.PrimitiveTypes.Int32, false),
	field("gpu_hour_usd", arrow.PrimitiveTypes.Float64, true),
	field("queue_depth", arrow.PrimitiveTypes.Float64, true),
	field("running", arrow.PrimitiveTypes.Float64, true),
	field("utilization", arrow.PrimitiveTypes.Float64, true),
	field("kv_utilization", arrow.PrimitiveTypes.Float64, true),
	field("request_rate", arrow.PrimitiveTypes.Float64, true),
	field("slo_attainment", arrow.PrimitiveTypes.Float64, true),
	field("ttft_p50_us", arrow.PrimitiveTypes.Int64, true),
	field("ttft_p99_us", arrow.PrimitiveTypes.Int64, true),
	field("e2e_p50_us", arrow.PrimitiveTypes.Int64, true),
	field("e2e_p99_us", arrow.PrimitiveTypes.Int64, true),
	field("pending", arrow.PrimitiveTypes.Int32, true),
	field("provisioning_us", arrow.PrimitiveTypes.Int64, true),
	field("warm_end_us", arrow.PrimitiveTypes.Int64, true),
}

// ScaleEventsSchema returns the scale-events schema carrying md.
func ScaleEventsSchema(md Meta) *arrow.Schema {
	return arrow.NewSchema(scaleFields, md.arrow(TableScaleEvents))
}

// WriteScaleEvents writes rows to sink (created with ScaleEventsSchema) in
// batches and closes it. The table is small: a row per decision or
// lifecycle change.
func WriteScaleEvents(sink Sink, schema *arrow.Schema, rows []ScaleEvent) error {
	b := array.NewRecordBuilder(Alloc, schema)
	defer b.Release()
	flush := func() error {
		rec := b.NewRecordBatch()
		defer rec.Release()
		if rec.NumRows() == 0 {
			return nil
		}
		return sink.Write(rec)
	}
	i64 := func(i int, v int64) {
		f := b.Field(i).(*array.Int64Builder)
		if v == Null {
			f.AppendNull()
		} else {
			f.Append(v)
		}
	}
	i32 := func(i int, v int32, ok bool) {
		f := b.Field(i).(*array.Int32Builder)
		if ok {
			f.Append(v)
		} else {
			f.AppendNull()
		}
	}
	f64 := func(i int, v float64) {
		f := b.Field(i).(*array.Float64Builder)
		if math.IsNaN(v) {
			f.AppendNull()
		} else {
			f.Append(v)
		}
	}
	str := func(i int, v string, nullable bool) {
		f := b.Field(i).(*array.StringBuilder)
		if v == "" && nullable {
			f.AppendNull()
		} else {
			f.Append(v)
		}
	}
	for k := range rows {
		e := &rows[k]
		decision := e.Action == ScaleUp || e.Action == ScaleDown
		b.Field(0).(*array.Int64Builder).Append(e.TimeUS)
		str(1, e.Deployment, false)
		b.Field(2).(*array.Int32Builder).Append(e.Pool)
		str(3, e.Action, false)
		str(4, e.ReplicaID, true)
		i32(5, e.From, decision)
		i32(6, e.To, decision)
		str(7, e.Reason, true)
		b.Field(8).(*array.Int32Builder).Append(e.Replicas)
		b.Field(9).(*array.Int32Builder).Append(e.Ready)
		b.Field(10).(*array.Int32Builder).Append(e.GPUsPerReplica)
		price := e.GPUHourUSD
		if price == 0 {
			price = math.NaN()
		}
		f64(11, price)
		for j, v := range [...]float64{e.QueueDepth, e.Running, e.Utilization, e.KVUtilization, e.RequestRate, e.SLOAttainment} {
			f64(12+j, v)
		}
		for j, v := range [...]int64{e.TTFTP50US, e.TTFTP99US, e.E2EP50US, e.E2EP99US} {
			i64(18+j, v)
		}
		i32(22, e.Pending, decision)
		i64(23, e.ProvisioningUS)
		i64(24, e.WarmEndUS)
		if b.Field(0).Len() >= BatchRows {
			if err := flush(); err != nil {
				sink.Close()
				return err
			}
		}
	}
	if err := flush(); err != nil {
		sink.Close()
		return err
	}
	return sink.Close()
}
