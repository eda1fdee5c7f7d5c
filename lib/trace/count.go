package trace

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
)

// CountRows counts the rows of an Arrow IPC stream or file at path by
// reading only the message headers and skipping the bodies (of a Parquet
// file, from its footer, when Parquet is linked in), so that a progress
// line can show a total and an ETA before the table is read.
// ok is false for anything else (stdin, Parquet, a corrupt file): the
// caller then goes without a total; reading the table reports the errors.
func CountRows(path string) (n int64, ok bool) {
	if path == "" || path == "-" {
		return 0, false
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	var off int64
	var magic [8]byte
	k, _ := f.ReadAt(magic[:], 0)
	switch {
	case k == 8 && string(magic[:6]) == "ARROW1":
		off = 8 // an IPC file holds a stream after its 8-byte magic, then the footer
	case k >= 4 && string(magic[:4]) == "PAR1":
		if pf, ok := formatFor("x.parquet"); ok && pf.Rows != nil {
			n, err := pf.Rows(path) // from the footer
			return n, err == nil
		}
		return 0, false
	}
	var hdr [8]byte
	for {
		k, err := f.ReadAt(hdr[:4], off)
		if k < 4 {
			return n, k == 0 && errors.Is(err, io.EOF) // a stream without its marker still counts
		}
		off += 4
		size := binary.LittleEndian.Uint32(hdr[:4])
		if size == contToken {
			if k, _ := f.ReadAt(hdr[4:], off); k < 4 {
				return 0, false
			}
			off += 4
			size = binary.LittleEndian.Uint32(hdr[4:])
		}
		if size == 0 {
			return n, true // end-of-stream marker
		}
		if size < 8 || size > maxMetadataBytes {
			return 0, false
		}
		meta := make([]byte, size)
		if k, _ := f.ReadAt(meta, off); k < len(meta) {
			return 0, false
		}
		rows, body, ok := batchRows(meta)
		if !ok {
			return 0, false
		}
		n += rows
		off += int64(size) + body // the body is skipped, not read
	}
}

// batchRows returns the row count of a record-batch message (0 for other
// messages) and the length of the message's body.
func batchRows(meta []byte) (rows, body int64, ok bool) {
	b := fbuf(meta)
	msg, err := b.root()
	if err != nil {
		return 0, 0, false
	}
	if p := b.field(msg, 3); p != 0 {
		if p+8 > len(b) {
			return 0, 0, false
		}
		body = int64(binary.LittleEndian.Uint64(b[p:]))
	}
	if body < 0 || body > maxBodyBytes {
		return 0, 0, false
	}
	var htype byte
	if p := b.field(msg, 1); p != 0 && p < len(b) {
		htype = b[p]
	}
	if htype != hdrRecordBatch {
		return 0, body, true
	}
	rb, found, err := b.subtable(msg, 2)
	if err != nil || !found {
		return 0, 0, false
	}
	if p := b.field(rb, 0); p != 0 {
		if p+8 > len(b) {
			return 0, 0, false
		}
		rows = int64(binary.LittleEndian.Uint64(b[p:]))
	}
	return rows, body, rows >= 0
}
