package trace

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// batchWriter turns appended rows into record batches of BatchRows rows.
// Plain columns use arrow builders, re-reserved after each flush from the
// previous batch's sizes so they do not grow from zero every batch.
// Dictionary columns bypass arrow's dictionary builder, which allocates on
// every append: they keep int32 indices and the cumulative value list, and
// build the dictionary array once per batch (the same array while no new
// value appears, which the IPC writer then does not resend).
type batchWriter struct {
	sink   Sink
	schema *arrow.Schema
	b      *array.RecordBuilder
	dicts  []*dictCol // by field index; nil for plain columns
	pool   *recycler  // the builders' memory, reused batch after batch
	n      int
	rows   int64
	// room is the rows every plain column's builder has room for, always
	// more than n between rows: a writer may append a row's fixed-width
	// values with the builders' Unsafe methods (see put64).
	room int
}

func newBatchWriter(sink Sink, schema *arrow.Schema) batchWriter {
	pool := newRecycler()
	w := batchWriter{sink: sink, schema: schema, b: array.NewRecordBuilder(pool, schema), dicts: make([]*dictCol, schema.NumFields()), pool: pool}
	for i, f := range schema.Fields() {
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			w.dicts[i] = &dictCol{dt: dt, index: map[string]int32{}, nullable: f.Nullable, mem: pool}
		}
	}
	// Room for a small table only: a table that fills a batch gets a full
	// batch's room after its first flush. Reserving BatchRows up front cost
	// 13 MB of zeroed memory per results table, most of a 1,000-row run's
	// time in a sweep.
	w.reserve(firstBatchRows)
	return w
}

const firstBatchRows = 1024

func (w *batchWriter) flush() error { return w.flushBatch(false) }

// flushBatch writes the rows held; final skips reserving room for more.
// Room for the next batch is reserved after the batch is written and
// released, so that it reuses the batch's buffers (see recycler).
func (w *batchWriter) flushBatch(final bool) error {
	if w.n == 0 {
		return nil
	}
	cols := make([]arrow.Array, len(w.dicts))
	var data []int // string and list builders' value sizes, by field index
	for i, d := range w.dicts {
		if d != nil {
			cols[i] = d.build()
			continue
		}
		fb := w.b.Field(i)
		switch x := fb.(type) {
		case *array.StringBuilder:
			data = growTo(data, len(w.dicts))
			data[i] = x.DataLen()
		case *array.ListBuilder:
			data = growTo(data, len(w.dicts))
			data[i] = x.ValueBuilder().Len()
		}
		cols[i] = fb.NewArray()
	}
	rec := array.NewRecordBatch(w.schema, cols, int64(w.n))
	for _, c := range cols {
		c.Release()
	}
	w.n = 0
	err := w.sink.Write(rec)
	rec.Release()
	if final {
		return err
	}
	w.reserve(BatchRows)
	for i, d := range w.dicts {
		if d != nil {
			continue
		}
		switch x := w.b.Field(i).(type) {
		case *array.StringBuilder:
			x.ReserveData(data[i])
		case *array.ListBuilder:
			x.ValueBuilder().Reserve(data[i])
		}
	}
	return err
}

// reserve makes room for rows rows in the plain columns' builders (the
// dictionary columns' arrow builders are never used: see dictCol). Arrow
// rounds a reservation of k to the power of two above k, so 32,768 rows
// asked as such get room for 65,536: ask for one less.
func (w *batchWriter) reserve(rows int) {
	for i, d := range w.dicts {
		if d != nil {
			continue
		}
		fb := w.b.Field(i)
		if need := rows - 1 - fb.Len(); need > 0 {
			fb.Reserve(need)
		}
	}
	w.room = rows
}

func growTo(xs []int, n int) []int {
	if xs == nil {
		xs = make([]int, n)
	}
	return xs
}

func (w *batchWriter) added() error {
	w.n++
	w.rows++
	if w.n >= BatchRows {
		return w.flush()
	}
	if w.n >= w.room {
		// A table past its first room: a whole batch's room now, rather
		// than doubling five times through sizes no later batch uses.
		w.reserve(BatchRows)
	}
	return nil
}

// put64 appends v (Null: a null) to a builder of the batch being filled;
// put32 appends v. The builders have room for the row (batchWriter.room),
// which is what Append would check value by value.
func put64(b *array.Int64Builder, v int64) {
	if v == Null {
		b.UnsafeAppendBoolToBitmap(false)
	} else {
		b.UnsafeAppend(v)
	}
}

func put32(b *array.Int32Builder, v int32) { b.UnsafeAppend(v) }

// close flushes, closes the sink and releases the builders. It always
// writes the schema, so an empty table is still a valid stream.
func (w *batchWriter) close() error {
	err := w.flushBatch(true)
	if cerr := w.sink.Close(); err == nil {
		err = cerr
	}
	w.release()
	return err
}

func (w *batchWriter) release() {
	w.b.Release()
	for _, d := range w.dicts {
		if d != nil && d.dict != nil {
			d.dict.Release()
		}
	}
	w.pool.drop()
}

// abort discards the output of a failed run (see Abort) and releases the builders.
func (w *batchWriter) abort() {
	Abort(w.sink)
	w.release()
}

// dictCol accumulates one dictionary<int32, string> column.
type dictCol struct {
	dt       *arrow.DictionaryType
	nullable bool
	index    map[string]int32
	values   []string
	idx      []int32 // -1 for a null
	nulls    int     // in idx
	valid    []bool  // build's scratch
	dict     arrow.Array
	dictLen  int
	mem      memory.Allocator
	// The previous value and its index: consecutive rows usually repeat a
	// dictionary value (one tenant's session), and this skips the map.
	last    string
	lastI   int32
	hasLast bool
}

// appendNulls appends n nulls (the column is nullable).
func (d *dictCol) appendNulls(n int) {
	d.nulls += n
	for ; n > 0; n-- {
		d.idx = append(d.idx, -1)
	}
}

func (d *dictCol) append(v string) {
	if v == "" && d.nullable {
		d.idx = append(d.idx, -1)
		d.nulls++
		return
	}
	var i int32
	if d.hasLast && v == d.last {
		i = d.lastI
	} else {
		var ok bool
		if i, ok = d.index[v]; !ok {
			i = int32(len(d.values))
			d.values = append(d.values, v)
			d.index[v] = i
		}
		d.last, d.lastI, d.hasLast = v, i, true
	}
	d.idx = append(d.idx, i)
}

func (d *dictCol) build() arrow.Array {
	if d.dict == nil || d.dictLen != len(d.values) {
		if d.dict != nil {
			d.dict.Release()
		}
		sb := array.NewStringBuilder(d.mem)
		sb.AppendValues(d.values, nil)
		d.dict, d.dictLen = sb.NewArray(), len(d.values)
		sb.Release()
	}
	ib := array.NewInt32Builder(d.mem)
	if len(d.idx) > 1 {
		ib.Reserve(len(d.idx) - 1) // exactly len(d.idx): see reserve
	}
	var valid []bool
	if d.nulls > 0 {
		// A null's index is written as 0 under its cleared validity bit.
		valid = d.valid[:0]
		for k, x := range d.idx {
			valid = append(valid, x >= 0)
			if x < 0 {
				d.idx[k] = 0
			}
		}
		d.valid = valid
	}
	ib.AppendValues(d.idx, valid)
	indices := ib.NewArray()
	ib.Release()
	out := array.NewDictionaryArray(d.dt, indices, d.dict)
	indices.Release()
	d.idx, d.nulls = d.idx[:0], 0
	return out
}

var _ memory.Allocator = Alloc
