package trace

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// checkBatch verifies that every column's buffers hold what its length and
// offsets claim. arrow-go does not check data read from IPC, and the typed
// readers index buffers directly, so a corrupt or hostile file would
// otherwise panic instead of producing an error.
func checkBatch(rec arrow.RecordBatch) error {
	for i, c := range rec.Columns() {
		if int64(c.Len()) != rec.NumRows() {
			return fmt.Errorf("corrupt Arrow data: column %s has %d rows in a batch of %d", rec.ColumnName(i), c.Len(), rec.NumRows())
		}
		if err := checkData(c.Data(), 0); err != nil {
			return fmt.Errorf("corrupt Arrow data in column %s: %w", rec.ColumnName(i), err)
		}
	}
	return nil
}

// maxValues bounds lengths before any size arithmetic so it cannot overflow.
const maxValues = 1 << 40

func bufLen(d arrow.ArrayData, i int) int {
	bs := d.Buffers()
	if i >= len(bs) || bs[i] == nil {
		return 0
	}
	return bs[i].Len()
}

func checkData(d arrow.ArrayData, depth int) error {
	if depth > 16 {
		return fmt.Errorf("nested deeper than 16 levels")
	}
	off, n := d.Offset(), d.Len()
	if off < 0 || n < 0 || off > maxValues || n > maxValues {
		return fmt.Errorf("offset %d, length %d out of range", off, n)
	}
	end := off + n
	if d.NullN() != 0 && len(d.Buffers()) > 0 && d.Buffers()[0] != nil && bufLen(d, 0)*8 < end {
		return fmt.Errorf("validity bitmap of %d bytes for %d values", bufLen(d, 0), end)
	}
	switch t := d.DataType().(type) {
	case *arrow.BooleanType:
		if bufLen(d, 1)*8 < end {
			return fmt.Errorf("%d bytes for %d booleans", bufLen(d, 1), end)
		}
	case arrow.FixedWidthDataType:
		w := t.BitWidth() / 8
		if _, isDict := t.(*arrow.DictionaryType); !isDict && w > 0 && bufLen(d, 1) < end*w {
			return fmt.Errorf("%d bytes for %d values of %d bytes", bufLen(d, 1), end, w)
		}
	}
	switch t := d.DataType().(type) {
	case *arrow.StringType, *arrow.BinaryType:
		return checkOffsets(d, end, bufLen(d, 2))
	case *arrow.ListType:
		children := d.Children()
		if len(children) != 1 {
			return fmt.Errorf("list without its values")
		}
		if err := checkOffsets(d, end, children[0].Len()); err != nil {
			return err
		}
		return checkData(children[0], depth+1)
	case *arrow.DictionaryType:
		dict := d.Dictionary()
		if dict == nil {
			return fmt.Errorf("dictionary column without a dictionary")
		}
		if err := checkData(dict, depth+1); err != nil {
			return err
		}
		w := t.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
		if bufLen(d, 1) < end*w {
			return fmt.Errorf("%d bytes for %d dictionary indices", bufLen(d, 1), end)
		}
		b := d.Buffers()[1].Bytes()
		var valid []byte // the validity bitmap, nil when no value is null
		if d.NullN() != 0 && len(d.Buffers()) > 0 && d.Buffers()[0] != nil {
			valid = d.Buffers()[0].Bytes()
		}
		if valid != nil && noneSet(valid, off, end) {
			return nil // every index is null: none is looked up
		}
		if idx, bad := firstBadIndex(b, w, off, end, uint64(dict.Len()), valid); bad {
			return fmt.Errorf("dictionary index %d outside a dictionary of %d values", idx, dict.Len())
		}
	default:
		for _, c := range d.Children() {
			if err := checkData(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// noneSet reports whether bits off to end of a bitmap are all clear (a
// column of nulls; the bitmap, not the header's null count, which a
// corrupt file could get wrong, is what readers look at).
func noneSet(bits []byte, off, end int) bool {
	for i := off; i < end; {
		if i%8 == 0 && i+8 <= end {
			if bits[i/8] != 0 {
				return false
			}
			i += 8
			continue
		}
		if bits[i/8]&(1<<(i%8)) != 0 {
			return false
		}
		i++
	}
	return true
}

// firstBadIndex returns the first index of b (w bytes each, rows off to
// end) outside [0, n) that is not null. One loop per width: this runs over
// every dictionary column of every batch read.
func firstBadIndex(b []byte, w, off, end int, n uint64, valid []byte) (int64, bool) {
	bad := func(i int, idx int64) bool {
		return uint64(idx) >= n && (valid == nil || valid[i/8]&(1<<(i%8)) != 0)
	}
	switch w {
	case 1:
		for i := off; i < end; i++ {
			if idx := int64(int8(b[i])); bad(i, idx) {
				return idx, true
			}
		}
	case 2:
		for i := off; i < end; i++ {
			if idx := int64(int16(binary.LittleEndian.Uint16(b[2*i:]))); bad(i, idx) {
				return idx, true
			}
		}
	case 4:
		for i := off; i < end; i++ {
			if idx := int64(int32(binary.LittleEndian.Uint32(b[4*i:]))); bad(i, idx) {
				return idx, true
			}
		}
	case 8:
		for i := off; i < end; i++ {
			if idx := int64(binary.LittleEndian.Uint64(b[8*i:])); bad(i, idx) {
				return idx, true
			}
		}
	}
	return 0, false
}

// checkOffsets checks int32 offsets [off, end] are monotone and within limit.
func checkOffsets(d arrow.ArrayData, end, limit int) error {
	if bufLen(d, 1) < (end+1)*4 {
		return fmt.Errorf("%d bytes of offsets for %d values", bufLen(d, 1), end)
	}
	b := d.Buffers()[1].Bytes()
	prev := int32(binary.LittleEndian.Uint32(b[4*d.Offset():]))
	if prev < 0 {
		return fmt.Errorf("negative offset %d", prev)
	}
	for i := d.Offset() + 1; i <= end; i++ {
		o := int32(binary.LittleEndian.Uint32(b[4*i:]))
		if o < prev {
			return fmt.Errorf("offsets decrease at value %d", i-1)
		}
		prev = o
	}
	if int(prev) > limit {
		return fmt.Errorf("offset %d beyond %d values", prev, limit)
	}
	return nil
}
