package trace

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// dictData is a dictionary<index, string> column over a two-value
// dictionary with the given raw indices; null[i] clears row i's validity bit.
func dictData(t *testing.T, index arrow.DataType, idx []int64, null []bool, off int) arrow.ArrayData {
	t.Helper()
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	sb.AppendValues([]string{"a", "b"}, nil)
	dict := sb.NewArray()
	sb.Release()
	defer dict.Release()
	w := index.(arrow.FixedWidthDataType).BitWidth() / 8
	raw := make([]byte, w*len(idx))
	for i, v := range idx {
		switch w {
		case 1:
			raw[i] = byte(int8(v))
		case 2:
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(int16(v)))
		case 4:
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(v)))
		case 8:
			binary.LittleEndian.PutUint64(raw[8*i:], uint64(v))
		}
	}
	var bitmap *memory.Buffer
	nulls := 0
	if null != nil {
		bits := make([]byte, (len(idx)+7)/8)
		for i, n := range null {
			if n {
				nulls++
			} else {
				bits[i/8] |= 1 << (i % 8)
			}
		}
		bitmap = memory.NewBufferBytes(bits)
	}
	dt := &arrow.DictionaryType{IndexType: index, ValueType: arrow.BinaryTypes.String}
	d := array.NewData(dt, len(idx)-off, []*memory.Buffer{bitmap, memory.NewBufferBytes(raw)}, nil, nulls, off)
	d.SetDictionary(dict.Data())
	return d
}

func TestCheckDataDictionaryIndices(t *testing.T) {
	widths := []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64}
	for _, tc := range []struct {
		name string
		idx  []int64
		null []bool
		off  int
		bad  bool
	}{
		{name: "in range", idx: []int64{0, 1, 1, 0, 1, 0, 0, 1, 1}},
		{name: "past the end", idx: []int64{0, 1, 2}, bad: true},
		{name: "negative", idx: []int64{0, -1, 1}, bad: true},
		{name: "out of range under a null", idx: []int64{0, 7, 1}, null: []bool{false, true, false}},
		{name: "out of range beside a null", idx: []int64{0, 7, 1}, null: []bool{true, false, false}, bad: true},
		{name: "every row null", idx: []int64{5, 9, -3, 7, 7, 7, 7, 7, 7, 7}, null: []bool{true, true, true, true, true, true, true, true, true, true}},
		{name: "out of range in the tail of a null byte", idx: []int64{5, 5, 5, 5, 5, 5, 5, 5, 5, 9}, null: []bool{true, true, true, true, true, true, true, true, true, false}, bad: true},
		{name: "out of range before the offset", idx: []int64{9, 0, 1}, off: 1},
		{name: "out of range after the offset", idx: []int64{0, 0, 9}, off: 1, bad: true},
		{name: "null rows before the offset", idx: []int64{9, 9, 0, 9}, null: []bool{true, true, false, false}, off: 2, bad: true},
	} {
		for _, w := range widths {
			t.Run(tc.name+"/"+w.String(), func(t *testing.T) {
				d := dictData(t, w, tc.idx, tc.null, tc.off)
				defer d.Release()
				err := checkData(d, 0)
				if tc.bad != (err != nil) {
					t.Fatalf("checkData = %v, want an error: %v", err, tc.bad)
				}
				if err != nil && !strings.Contains(err.Error(), "outside a dictionary of 2 values") {
					t.Fatalf("error %q does not name the dictionary", err)
				}
			})
		}
	}
}
