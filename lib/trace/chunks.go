package trace

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TableChunks is the per-request event log blis-load writes with --chunks:
// one row per event of each request, on the session's monotonic clock.
const TableChunks = "chunks"

// Chunk column names.
const (
	ColEvent  = "event"
	ColTimeUS = "t_us"
	ColChunk  = "chunk"
	ColDetail = "detail"
)

// Chunk events, in the order they happen to a request.
const (
	EventDue   = "due"   // the plan (or its dependencies) made the request due
	EventSent  = "sent"  // the HTTP request started
	EventChunk = "chunk" // a streamed event carrying generated text (chunk 1 is the first token)
	EventDone  = "done"  // the stream completed
	EventError = "error" // the request ended otherwise (detail: status and reason)
)

var chunkFields = []arrow.Field{
	field(ColRequestID, arrow.BinaryTypes.String, false),
	field(ColEvent, dictString, false),
	field(ColTimeUS, arrow.PrimitiveTypes.Int64, false),
	field(ColChunk, arrow.PrimitiveTypes.Int32, false),
	field(ColDetail, arrow.BinaryTypes.String, true),
}

// ChunksSchema returns the schema of the chunks table.
func ChunksSchema(md Meta) *arrow.Schema {
	return arrow.NewSchema(chunkFields, md.arrow(TableChunks))
}

// Chunk is one row of the chunks table.
type Chunk struct {
	RequestID string
	Event     string
	TimeUS    int64
	Chunk     int32  // 1-based index of a text chunk; 0 for other events
	Detail    string // "" = null
}

// ChunkWriter writes Chunk rows in batches.
type ChunkWriter struct {
	batchWriter
	id, detail *array.StringBuilder
	event      *dictCol
	t          *array.Int64Builder
	n          *array.Int32Builder
}

// NewChunkWriter writes chunks to sink, created with ChunksSchema(md).
func NewChunkWriter(sink Sink, schema *arrow.Schema) *ChunkWriter {
	w := &ChunkWriter{batchWriter: newBatchWriter(sink, schema)}
	b := w.b
	w.id, w.event = b.Field(0).(*array.StringBuilder), w.dicts[1]
	w.t, w.n = b.Field(2).(*array.Int64Builder), b.Field(3).(*array.Int32Builder)
	w.detail = b.Field(4).(*array.StringBuilder)
	return w
}

// Write appends one event.
func (w *ChunkWriter) Write(c *Chunk) error {
	w.id.Append(c.RequestID)
	w.event.append(c.Event)
	w.t.Append(c.TimeUS)
	w.n.Append(c.Chunk)
	if c.Detail == "" {
		w.detail.AppendNull()
	} else {
		w.detail.Append(c.Detail)
	}
	return w.added()
}

// Rows returns the number of rows written so far.
func (w *ChunkWriter) Rows() int64 { return w.rows }

// Close flushes the last batch and closes the sink.
func (w *ChunkWriter) Close() error { return w.close() }

// Abort ends the output of a failed run (see ResultWriter.Abort).
func (w *ChunkWriter) Abort() { w.abort() }
