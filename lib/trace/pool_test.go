package trace

import (
	"bytes"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

func TestRecycler(t *testing.T) {
	p := newRecycler()
	a := p.Allocate(1000)
	if len(a) != 1000 {
		t.Fatalf("Allocate(1000) has %d bytes", len(a))
	}
	for i := range a {
		a[i] = 0xff
	}
	p.Free(a)
	b := p.Allocate(900) // fits the freed buffer
	if &b[0] != &a[0] {
		t.Fatal("a freed buffer of the right size was not reused")
	}
	for i, x := range b[:cap(b)] {
		if x != 0 {
			t.Fatalf("reused buffer not cleared at byte %d", i)
		}
	}
	p.Free(b)
	if c := p.Allocate(100); &c[0] == &a[0] {
		t.Fatal("a buffer more than twice the size asked for was handed out")
	}
	d, reused := p.take(1000, 1000)
	if !reused || &d[0] != &a[0] || d[0] != 0 {
		t.Fatalf("take: reused %v", reused)
	}
	d[0] = 7
	p.Free(d)
	if e, _ := p.take(1000, 1000); e[0] != 7 {
		t.Fatal("take cleared the buffer it reused")
	}
	p.Free(make([]byte, maxRecycled+1))
	if p.bytes > maxRecycled {
		t.Fatalf("holds %d bytes, beyond its bound", p.bytes)
	}
}

// Later batches reuse the memory of earlier ones: values under nulls must
// still be written as zeros (the file's bytes do not depend on what the
// memory held before), and every value reads back.
func TestResultWriterReusedMemoryIsClean(t *testing.T) {
	var buf bytes.Buffer
	schema := ResultsSchema(NewMeta())
	sink, err := Create("-", &buf, schema)
	if err != nil {
		t.Fatal(err)
	}
	w := NewResultWriter(sink, schema)
	n := 3*BatchRows + 17
	for i := 0; i < n; i++ {
		r := NewResult(NewRequest("r"))
		r.Status, r.ArrivalUS, r.InputTokens = StatusCompleted, int64(i), 10
		if i < BatchRows { // the first batch fills every value
			r.InstanceID, r.AdmittedUS, r.FinishedUS, r.TTFTUS, r.TimeoutUS = 3, -1, -1, -1, 99
			r.TenantID, r.ReplicaID = "t", "d/3"
		}
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := ipc.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	rows := 0
	for rd.Next() {
		rec := rd.RecordBatch()
		for c, col := range rec.Columns() {
			var vals []int64
			switch a := col.(type) {
			case *array.Int64:
				vals = a.Int64Values()
			case *array.Int32:
				for _, v := range a.Int32Values() {
					vals = append(vals, int64(v))
				}
			case *array.Dictionary:
				for i := 0; i < a.Len(); i++ {
					vals = append(vals, int64(a.GetValueIndex(i)))
				}
			default:
				continue
			}
			for i, v := range vals {
				if col.IsNull(i) && v != 0 {
					t.Fatalf("batch at row %d, column %s, row %d: null over %d, want 0", rows, rec.ColumnName(c), i, v)
				}
			}
		}
		rows += int(rec.NumRows())
	}
	if err := rd.Err(); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if rows != n {
		t.Fatalf("read %d rows, wrote %d", rows, n)
	}
}
