package trace

import (
	"io"

	"github.com/apache/arrow-go/v18/arrow"
)

// WithMeta returns schema's columns with md as their metadata, as a table of
// the given kind: a tool that copies a table it does not interpret (blis-convert
// changing a results table's format) keeps its columns and records itself in
// the provenance.
func WithMeta(schema *arrow.Schema, md Meta, table string) *arrow.Schema {
	return arrow.NewSchema(schema.Fields(), md.arrow(table))
}

// Copy writes every batch of src to sink unchanged and closes the sink; a
// failed copy aborts it (see Abort). It returns the number of rows copied.
func Copy(src *Source, sink Sink) (int64, error) {
	var n int64
	for {
		rec, err := src.Next()
		if err == io.EOF {
			return n, sink.Close()
		}
		if err == nil {
			err = sink.Write(rec)
		}
		if err != nil {
			Abort(sink)
			return n, err
		}
		n += rec.NumRows()
	}
}
