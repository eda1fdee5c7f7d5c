package report

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/blis-sim/blis/lib/trace"
)

func colIndex(s *arrow.Schema, name string) int { return trace.ColumnIndex(s, name) }

// checkInt returns an error unless column name is absent or an integer column.
func checkInt(path string, s *arrow.Schema, name string) error {
	if err := trace.CheckInt(s, name); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func checkStr(path string, s *arrow.Schema, name string) error {
	if err := trace.CheckString(s, name); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// icol reads one integer column of a batch without copying int64 data.
type icol struct {
	arr   arrow.Array
	vals  []int64
	buf   []int64
	valid []byte // validity bitmap, nil when the batch has no nulls in this column
	off   int
}

func (c *icol) bind(rec arrow.RecordBatch, idx int) {
	c.arr, c.vals, c.valid = nil, nil, nil
	if idx < 0 {
		return
	}
	c.arr = rec.Column(idx)
	if c.arr.NullN() > 0 {
		c.valid, c.off = c.arr.NullBitmapBytes(), c.arr.Data().Offset()
	}
	n := int(rec.NumRows())
	conv := func(get func(int) int64) {
		if cap(c.buf) < n {
			c.buf = make([]int64, n)
		}
		c.buf = c.buf[:n]
		for i := range c.buf {
			c.buf[i] = get(i)
		}
		c.vals = c.buf
	}
	switch a := c.arr.(type) {
	case *array.Int64:
		c.vals = a.Int64Values()
	case *array.Int32:
		v := a.Int32Values()
		conv(func(i int) int64 { return int64(v[i]) })
	case *array.Int16:
		conv(func(i int) int64 { return int64(a.Value(i)) })
	case *array.Int8:
		conv(func(i int) int64 { return int64(a.Value(i)) })
	case *array.Uint32:
		conv(func(i int) int64 { return int64(a.Value(i)) })
	case *array.Uint16:
		conv(func(i int) int64 { return int64(a.Value(i)) })
	case *array.Uint8:
		conv(func(i int) int64 { return int64(a.Value(i)) })
	default:
		c.arr, c.valid = nil, nil
	}
}

// get returns the value at row i and whether it is present.
func (c *icol) get(i int) (int64, bool) {
	if c.vals == nil || (c.valid != nil && !bitutil.BitIsSet(c.valid, c.off+i)) {
		return 0, false
	}
	return c.vals[i], true
}

// or returns the value at row i, or def when null or absent.
func (c *icol) or(i int, def int64) int64 {
	if v, ok := c.get(i); ok {
		return v
	}
	return def
}

// strKey maps a string column to small dense codes (-1 for null or an absent
// column). Dictionary columns are resolved once per batch, plain strings by
// one map lookup per row that does not allocate.
type strKey struct {
	names  []string
	codes  map[string]int32
	dict   *array.Dictionary
	idx32  []int32 // the dictionary's indices when they are int32 (the common case)
	dcodes []int32
	plain  *array.String
	large  *array.LargeString
}

func newStrKey() *strKey { return &strKey{codes: map[string]int32{}} }

func (k *strKey) intern(s string) int32 {
	c, ok := k.codes[s]
	if !ok {
		c = int32(len(k.names))
		s = strings.Clone(s)
		k.names = append(k.names, s)
		k.codes[s] = c
	}
	return c
}

func (k *strKey) bind(rec arrow.RecordBatch, idx int) {
	k.dict, k.plain, k.large, k.dcodes, k.idx32 = nil, nil, nil, k.dcodes[:0], nil
	if idx < 0 {
		return
	}
	switch a := rec.Column(idx).(type) {
	case *array.Dictionary:
		k.dict = a
		if ix, ok := a.Indices().(*array.Int32); ok {
			k.idx32 = ix.Int32Values()
		}
		vals := a.Dictionary().(*array.String)
		for j := 0; j < vals.Len(); j++ {
			if vals.IsNull(j) {
				k.dcodes = append(k.dcodes, -1)
				continue
			}
			k.dcodes = append(k.dcodes, k.intern(vals.Value(j)))
		}
	case *array.String:
		k.plain = a
	case *array.LargeString:
		k.large = a
	}
}

func (k *strKey) code(i int) int32 {
	switch {
	case k.dict != nil:
		if k.dict.IsNull(i) {
			return -1
		}
		if k.idx32 != nil {
			return k.dcodes[k.idx32[i]]
		}
		return k.dcodes[k.dict.GetValueIndex(i)]
	case k.plain != nil:
		if k.plain.IsNull(i) {
			return -1
		}
		return k.intern(k.plain.Value(i))
	case k.large != nil:
		if k.large.IsNull(i) {
			return -1
		}
		return k.intern(k.large.Value(i))
	}
	return -1
}
