// Package parquetio adds Parquet to the formats lib/trace reads and writes.
// It is a separate package because Parquet pulls gRPC and protobuf into a
// binary (20 MB to 55 MB for blis-sim, 2 ms more to start): a library user
// or a tool that writes no table can do without it. Every blis tool that
// reads or writes tables imports it for its side effect, since every table
// must be writable as Parquet by the tool that makes it.
package parquetio

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/blis-sim/blis/lib/trace"
)

func init() {
	trace.RegisterFormat(".parquet", trace.Format{Name: "parquet", Open: open, Write: write, Rows: rows})
}

// rows reads the row count from the file's footer.
func rows(path string) (n int64, err error) {
	defer func() { guard(recover(), &err) }()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return 0, err
	}
	defer pf.Close()
	return pf.NumRows(), nil
}

type reader struct {
	pf     *file.Reader
	rr     pqarrow.RecordReader
	schema *arrow.Schema
}

func open(path string) (_ trace.BatchReader, err error) {
	var pf *file.Reader
	defer func() {
		guard(recover(), &err)
		if err != nil && pf != nil {
			pf.Close()
		}
	}()
	if pf, err = file.OpenParquetFile(path, false); err != nil {
		return nil, err
	}
	if err := checkStoredSchema(pf); err != nil {
		return nil, err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: trace.BatchRows}, trace.Alloc)
	if err != nil {
		return nil, err
	}
	// The record reader drops schema metadata; the file's schema keeps it.
	schema, err := fr.Schema()
	if err != nil {
		return nil, err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return nil, err
	}
	return &reader{pf: pf, rr: rr, schema: schema}, nil
}

// guard turns p, a panic of arrow-go's Parquet decoder, into the read's
// error: some corrupt files make it dereference a page header part that
// is not there (found by FuzzReadParquet) instead of returning an error.
func guard(p any, err *error) {
	if p != nil {
		*err = fmt.Errorf("corrupt Parquet file: %v", p)
	}
}

// checkStoredSchema validates the Arrow schema a writer stored in the
// file's ARROW:schema metadata (pqarrow restores the Arrow types from it)
// before pqarrow decodes it: that decoder trusts the lengths inside.
// The value is base64, padded or not, as pqarrow reads it.
func checkStoredSchema(pf *file.Reader) error {
	v := pf.MetaData().KeyValueMetadata().FindValue("ARROW:schema")
	if v == nil {
		return nil
	}
	var b []byte
	var err error
	if len(*v)%4 == 0 {
		b, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(b) == 0 || err != nil {
		b, err = base64.RawStdEncoding.DecodeString(*v)
	}
	if err == nil {
		err = trace.CheckIPCSchema(b)
	}
	if err != nil {
		return fmt.Errorf("the stored Arrow schema (ARROW:schema metadata) is corrupt: %w", err)
	}
	return nil
}

func (r *reader) Schema() *arrow.Schema { return r.schema }

func (r *reader) Next() (_ arrow.RecordBatch, err error) {
	defer func() { guard(recover(), &err) }()
	if r.rr.Next() {
		return r.rr.RecordBatch(), nil
	}
	if err := r.rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return nil, io.EOF
}

func (r *reader) Close() error {
	r.rr.Release()
	return r.pf.Close()
}

type writer struct {
	fw     *pqarrow.FileWriter
	schema *arrow.Schema
}

func write(w io.Writer, schema *arrow.Schema) (trace.Sink, error) {
	plain := trace.PlainSchema(schema)
	// No dictionary pages: a column whose dictionary outgrows its page
	// falls back to PLAIN midway, and arrow-go then writes the column's
	// page counts per encoding from a map, in random order, so the same
	// rows gave different bytes. zstd packs the repeated values of plain
	// pages smaller still (400k results: 16.6 MB against 18.4 MB, 23% less
	// CPU).
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDictionaryDefault(false))
	fw, err := pqarrow.NewFileWriter(plain, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	return &writer{fw: fw, schema: plain}, nil
}

func (w *writer) Write(rec arrow.RecordBatch) error {
	p, err := trace.PlainBatch(w.schema, rec)
	if err != nil {
		return err
	}
	defer p.Release()
	return w.fw.WriteBuffered(p)
}

func (w *writer) Close() error { return w.fw.Close() }
