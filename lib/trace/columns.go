package trace

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Column accessors used by the typed readers. Each accepts the type the BLIS
// writers produce and the obvious alternatives other tools produce (plain
// strings for dictionaries, int64 for int32 and the reverse), and rejects
// anything else naming the column.

// ColumnIndex returns the index of column name in s, or -1.
func ColumnIndex(s *arrow.Schema, name string) int { return colIndex(s, name) }

// CheckInt returns an error naming the column unless it is absent or holds
// integers of any width.
func CheckInt(s *arrow.Schema, name string) error { return checkInt(s, name) }

// CheckString returns an error naming the column unless it is absent or
// holds strings or dictionary-encoded strings.
func CheckString(s *arrow.Schema, name string) error { return checkString(s, name) }

func colIndex(s *arrow.Schema, name string) int {
	idx := s.FieldIndices(name)
	if len(idx) == 0 {
		return -1
	}
	return idx[0]
}

func typeErr(name, want string, got arrow.DataType) error {
	return fmt.Errorf("column %s: expected %s, found %s", name, want, got)
}

func checkString(s *arrow.Schema, name string) error {
	i := colIndex(s, name)
	if i < 0 {
		return nil
	}
	switch t := s.Field(i).Type.(type) {
	case *arrow.StringType, *arrow.LargeStringType:
		return nil
	case *arrow.DictionaryType:
		if arrow.TypeEqual(t.ValueType, arrow.BinaryTypes.String) {
			return nil
		}
	}
	return typeErr(name, "string or dictionary<string>", s.Field(i).Type)
}

func checkInt(s *arrow.Schema, name string) error {
	i := colIndex(s, name)
	if i < 0 {
		return nil
	}
	switch s.Field(i).Type.ID() {
	case arrow.INT64, arrow.INT32, arrow.INT16, arrow.INT8, arrow.UINT32, arrow.UINT16, arrow.UINT8:
		return nil
	}
	return typeErr(name, "an integer", s.Field(i).Type)
}

func checkBool(s *arrow.Schema, name string) error {
	i := colIndex(s, name)
	if i < 0 || s.Field(i).Type.ID() == arrow.BOOL {
		return nil
	}
	return typeErr(name, "bool", s.Field(i).Type)
}

func checkList(s *arrow.Schema, name string, elem ...arrow.Type) error {
	i := colIndex(s, name)
	if i < 0 {
		return nil
	}
	if lt, ok := s.Field(i).Type.(*arrow.ListType); ok {
		for _, e := range elem {
			if lt.Elem().ID() == e {
				return nil
			}
		}
	}
	return typeErr(name, "a list of "+fmt.Sprint(elem), s.Field(i).Type)
}

// strCol reads a string or dictionary<string> column. Dictionary values are
// interned across batches so repeated tenants or models cost no allocation.
type strCol struct {
	plain  *array.String
	large  *array.LargeString
	dict   *array.Dictionary
	dvals  *array.String
	intern map[string]string
	dcache []string
}

func (c *strCol) bind(rec arrow.RecordBatch, name string) {
	c.plain, c.large, c.dict, c.dvals, c.dcache = nil, nil, nil, nil, c.dcache[:0]
	i := colIndex(rec.Schema(), name)
	if i < 0 {
		return
	}
	switch a := rec.Column(i).(type) {
	case *array.String:
		c.plain = a
	case *array.LargeString:
		c.large = a
	case *array.Dictionary:
		c.dict = a
		c.dvals = a.Dictionary().(*array.String)
		if c.intern == nil {
			c.intern = map[string]string{}
		}
		for j := 0; j < c.dvals.Len(); j++ {
			v := c.dvals.Value(j)
			s, ok := c.intern[v]
			if !ok {
				s = strings.Clone(v)
				c.intern[s] = s
			}
			c.dcache = append(c.dcache, s)
		}
	}
}

// get returns the value at row i ("" for null or an absent column).
func (c *strCol) get(i int) string {
	switch {
	case c.plain != nil:
		if c.plain.IsNull(i) {
			return ""
		}
		return strings.Clone(c.plain.Value(i))
	case c.dict != nil:
		if c.dict.IsNull(i) {
			return ""
		}
		return c.dcache[c.dict.GetValueIndex(i)]
	case c.large != nil:
		if c.large.IsNull(i) {
			return ""
		}
		return strings.Clone(c.large.Value(i))
	}
	return ""
}

// intCol reads any integer column as int64. The common widths are read
// straight from their values (int64, int32), the others through the array.
type intCol struct {
	a     arrow.Array
	i64   []int64
	i32   []int32
	valid []byte // validity bitmap, nil when the array has none
	off   int    // the array's offset into valid
}

func (c *intCol) bind(rec arrow.RecordBatch, name string) {
	*c = intCol{}
	i := colIndex(rec.Schema(), name)
	if i < 0 {
		return
	}
	c.a = rec.Column(i)
	switch a := c.a.(type) {
	case *array.Int64:
		c.i64 = a.Int64Values()
	case *array.Int32:
		c.i32 = a.Int32Values()
	}
	if b := c.a.NullBitmapBytes(); len(b) > 0 { // as Array.IsNull reads it
		c.valid, c.off = b, c.a.Data().Offset()
	}
}

// get returns the value and whether it is present (not null, column exists).
func (c *intCol) get(i int) (int64, bool) {
	if c.valid != nil {
		if j := c.off + i; c.valid[j/8]&(1<<(j%8)) == 0 {
			return 0, false
		}
	}
	switch {
	case c.i64 != nil:
		return c.i64[i], true
	case c.i32 != nil:
		return int64(c.i32[i]), true
	case c.a == nil:
		return 0, false
	}
	switch a := c.a.(type) {
	case *array.Int16:
		return int64(a.Value(i)), true
	case *array.Int8:
		return int64(a.Value(i)), true
	case *array.Uint32:
		return int64(a.Value(i)), true
	case *array.Uint16:
		return int64(a.Value(i)), true
	case *array.Uint8:
		return int64(a.Value(i)), true
	}
	return 0, false
}

type boolCol struct{ a *array.Boolean }

func (c *boolCol) bind(rec arrow.RecordBatch, name string) {
	c.a = nil
	if i := colIndex(rec.Schema(), name); i >= 0 {
		c.a, _ = rec.Column(i).(*array.Boolean)
	}
}

func (c *boolCol) get(i int, def bool) bool {
	if c.a == nil || c.a.IsNull(i) {
		return def
	}
	return c.a.Value(i)
}

type strListCol struct {
	l    *array.List
	vals *array.String
}

func (c *strListCol) bind(rec arrow.RecordBatch, name string) {
	c.l, c.vals = nil, nil
	if i := colIndex(rec.Schema(), name); i >= 0 {
		c.l = rec.Column(i).(*array.List)
		c.vals = c.l.ListValues().(*array.String)
	}
}

func (c *strListCol) get(i int) []string {
	if c.l == nil || c.l.IsNull(i) {
		return nil
	}
	s, e := c.l.ValueOffsets(i)
	if s == e {
		return nil
	}
	out := make([]string, 0, e-s)
	for j := s; j < e; j++ {
		out = append(out, strings.Clone(c.vals.Value(int(j))))
	}
	return out
}

type u64ListCol struct {
	l   *array.List
	u64 *array.Uint64
	i64 *array.Int64
}

func (c *u64ListCol) bind(rec arrow.RecordBatch, name string) {
	c.l, c.u64, c.i64 = nil, nil, nil
	if i := colIndex(rec.Schema(), name); i >= 0 {
		c.l = rec.Column(i).(*array.List)
		switch v := c.l.ListValues().(type) {
		case *array.Uint64:
			c.u64 = v
		case *array.Int64:
			c.i64 = v
		}
	}
}

func (c *u64ListCol) get(i int) []uint64 {
	if c.l == nil || c.l.IsNull(i) {
		return nil
	}
	s, e := c.l.ValueOffsets(i)
	if s == e {
		return nil
	}
	out := make([]uint64, e-s)
	for j := s; j < e; j++ {
		if c.u64 != nil {
			out[j-s] = c.u64.Value(int(j))
		} else {
			out[j-s] = uint64(c.i64.Value(int(j)))
		}
	}
	return out
}

// StringAt is the string at row i of a string, large-string or
// dictionary<string> column ("" for null, an absent column or another
// type): for readers that look at a few rows, such as error messages and
// the small decisions and anomalies tables; bulk readers bind a strCol.
func StringAt(a arrow.Array, i int) string {
	if a == nil || a.IsNull(i) {
		return ""
	}
	switch x := a.(type) {
	case *array.String:
		return x.Value(i)
	case *array.LargeString:
		return x.Value(i)
	case *array.Dictionary:
		if d, ok := x.Dictionary().(*array.String); ok {
			return d.Value(x.GetValueIndex(i))
		}
	}
	return ""
}
