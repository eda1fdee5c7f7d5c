package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// frameReader frames Arrow IPC stream messages itself instead of using
// ipc.NewMessageReader, for two reasons: a stream that stops at a message
// boundary without the end-of-stream marker must be an error (a killed
// producer), and arrow-go trusts vector lengths inside message metadata, so a
// corrupt header can make it allocate terabytes and abort the process. Every
// vector the decoder will size an allocation by is checked against the bytes
// that actually arrived.
type frameReader struct {
	r    io.Reader
	read bool // a message header was read: an EOF now means truncation, not emptiness
	hdr  [8]byte
	cur  *ipc.Message
	refs int
	pool *recycler // message bodies, when recycled (Source.recycleBodies)
}

const (
	maxMetadataBytes = 64 << 20
	maxBodyBytes     = 8 << 30
	trustedBodyBytes = 64 << 20
	contToken        = 0xFFFFFFFF
)

func newFrameReader(r io.Reader) *frameReader { return &frameReader{r: r, refs: 1} }

func (f *frameReader) Retain() { f.refs++ }
func (f *frameReader) Release() {
	f.refs--
	if f.refs == 0 && f.cur != nil {
		f.cur.Release()
		f.cur = nil
	}
}

func (f *frameReader) Message() (*ipc.Message, error) {
	if _, err := io.ReadFull(f.r, f.hdr[:4]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, ErrTruncated
		}
		return nil, err
	}
	f.read = true
	n := binary.LittleEndian.Uint32(f.hdr[:4])
	if n == contToken {
		if _, err := io.ReadFull(f.r, f.hdr[4:8]); err != nil {
			return nil, truncated(err)
		}
		n = binary.LittleEndian.Uint32(f.hdr[4:8])
	}
	if n == 0 {
		return nil, io.EOF // end-of-stream marker
	}
	if n < 8 || n > maxMetadataBytes {
		return nil, fmt.Errorf("corrupt Arrow stream: message metadata length %d", n)
	}
	// Read what arrives rather than allocating whatever a header claims.
	meta, err := readN(f.r, int64(n), 1<<16)
	if err != nil {
		return nil, err
	}
	m, err := checkMessage(meta)
	if err != nil {
		return nil, fmt.Errorf("corrupt Arrow stream: %w", err)
	}
	bodyLen := m.bodyLen
	// The previous message goes first, so that its body, once the batch
	// made of it is released too, can take this one.
	if f.cur != nil {
		f.cur.Release()
		f.cur = nil
	}
	var body *memory.Buffer
	if f.pool != nil && bodyLen <= trustedBodyBytes {
		// Room for a batch an eighth larger: batches of a table differ a little.
		b, _ := f.pool.take(int(bodyLen), int(bodyLen+bodyLen/8))
		if _, err := io.ReadFull(f.r, b); err != nil {
			f.pool.Free(b)
			return nil, truncated(err)
		}
		body = memory.NewBufferWithAllocator(b, f.pool)
	} else {
		// Trust the declared length up to a size no real batch reaches;
		// beyond it, grow as bytes arrive so a forged header cannot
		// exhaust memory.
		b, err := readN(f.r, bodyLen, trustedBodyBytes)
		if err != nil {
			return nil, err
		}
		body = memory.NewBufferBytes(b)
	}
	bb := body.Bytes()
	if err := checkCompressedBody(meta, m, func(off int64) (int64, error) {
		return int64(binary.LittleEndian.Uint64(bb[off:])), nil // inside the body: checked
	}); err != nil {
		body.Release()
		return nil, fmt.Errorf("corrupt Arrow stream: %w", err)
	}
	f.cur = ipc.NewMessage(memory.NewBufferBytes(meta), body)
	body.Release() // the message holds it now
	return f.cur, nil
}

// readN reads n bytes of r: into one allocation of n when n is at most
// trusted, else into a buffer that grows as bytes arrive (a forged length
// costs what was sent, not what it claims). One exact allocation matters:
// a bytes.Buffer filled to its capacity doubles it before it sees EOF, and
// that copy and clear were a fifth of blis-sim's time on a 100k-request run.
func readN(r io.Reader, n, trusted int64) ([]byte, error) {
	if n <= trusted {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, truncated(err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	buf.Grow(int(trusted))
	if k, err := io.CopyN(&buf, r, n); err != nil {
		if err == io.EOF && k < n {
			return nil, ErrTruncated
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

func truncated(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return ErrTruncated
	}
	return err
}

// fbuf is a bounds-checked view of a flatbuffer.
type fbuf []byte

var errFB = errors.New("message metadata is not a valid flatbuffer")

func (b fbuf) u32(p int) (int, error) {
	if p < 0 || p+4 > len(b) {
		return 0, errFB
	}
	return int(binary.LittleEndian.Uint32(b[p:])), nil
}

// table is a flatbuffer table: its position and its vtable's.
type table struct{ pos, vt, vsize int }

func (b fbuf) table(pos int) (table, error) {
	if pos < 0 || pos+4 > len(b) {
		return table{}, errFB
	}
	vt := pos - int(int32(binary.LittleEndian.Uint32(b[pos:])))
	if vt < 0 || vt+4 > len(b) {
		return table{}, errFB
	}
	// A vtable is 4 bytes and a uint16 per field: an odd size is forged,
	// and flatbuffers' reader would take a field the half-entry only
	// starts as present where field below calls it absent.
	vsize := int(binary.LittleEndian.Uint16(b[vt:]))
	if vsize < 4 || vsize%2 != 0 || vt+vsize > len(b) {
		return table{}, errFB
	}
	return table{pos: pos, vt: vt, vsize: vsize}, nil
}

// root is the buffer's root table: its first uint32 gives the table's
// position.
func (b fbuf) root() (table, error) {
	pos, err := b.u32(0)
	if err != nil {
		return table{}, err
	}
	return b.table(pos)
}

// field returns the absolute position of field id, or 0 when absent.
func (b fbuf) field(t table, id int) int {
	o := 4 + 2*id
	if o+2 > t.vsize {
		return 0
	}
	off := int(binary.LittleEndian.Uint16(b[t.vt+o:]))
	if off == 0 {
		return 0
	}
	return t.pos + off
}

// ref follows the offset stored in field id (a table, vector or string).
func (b fbuf) ref(t table, id int) (int, bool, error) {
	p := b.field(t, id)
	if p == 0 {
		return 0, false, nil
	}
	off, err := b.u32(p)
	if err != nil {
		return 0, false, err
	}
	return p + off, true, nil
}

func (b fbuf) subtable(t table, id int) (table, bool, error) {
	p, ok, err := b.ref(t, id)
	if !ok || err != nil {
		return table{}, ok, err
	}
	st, err := b.table(p)
	return st, err == nil, err
}

// vector checks that vector field id of elem-byte elements fits in the buffer
// and returns the position of its first element and its length.
func (b fbuf) vector(t table, id, elem int) (start, n int, err error) {
	p, ok, err := b.ref(t, id)
	if !ok || err != nil {
		return 0, 0, err
	}
	if n, err = b.u32(p); err != nil {
		return 0, 0, err
	}
	if n > (len(b)-p-4)/elem {
		return 0, 0, fmt.Errorf("vector of %d elements in %d bytes of metadata", n, len(b))
	}
	return p + 4, n, nil
}

// tables visits each table of a vector-of-tables field.
func (b fbuf) tables(t table, id int, visit func(table) error) error {
	start, n, err := b.vector(t, id, 4)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		off, err := b.u32(start + 4*i)
		if err != nil {
			return err
		}
		st, err := b.table(start + 4*i + off)
		if err != nil {
			return err
		}
		if err := visit(st); err != nil {
			return err
		}
	}
	return nil
}

// Message header types and field ids, from Arrow's Message.fbs and Schema.fbs.
const (
	hdrSchema          = 1
	hdrDictionaryBatch = 2
	hdrRecordBatch     = 3
	typeUnion          = 14
)

// message is what checkMessage found in a Message flatbuffer: its body
// length and, for a record or dictionary batch, the RecordBatch table.
type message struct {
	bodyLen int64
	batch   table
	isBatch bool
}

// checkMessage validates the parts of a Message flatbuffer that arrow-go sizes
// allocations by.
func checkMessage(meta []byte) (message, error) {
	b := fbuf(meta)
	var m message
	msg, err := b.root()
	if err != nil {
		return m, err
	}
	var bodyLen int64
	if p := b.field(msg, 3); p != 0 {
		if p+8 > len(b) {
			return m, errFB
		}
		bodyLen = int64(binary.LittleEndian.Uint64(b[p:]))
	}
	if bodyLen < 0 || bodyLen > maxBodyBytes {
		return m, fmt.Errorf("message body length %d", bodyLen)
	}
	m.bodyLen = bodyLen
	if err := checkKeyValues(b, msg, 4); err != nil {
		return m, err
	}
	var htype byte
	if p := b.field(msg, 1); p != 0 {
		if p >= len(b) {
			return m, errFB
		}
		htype = b[p]
	}
	hdr, ok, err := b.subtable(msg, 2)
	if err != nil || !ok {
		return m, err
	}
	switch htype {
	case hdrSchema:
		err = checkSchema(b, hdr)
	case hdrDictionaryBatch:
		if rb, ok, e := b.subtable(hdr, 1); e != nil {
			err = e
		} else if ok {
			m.batch, m.isBatch = rb, true
			err = checkRecordBatch(b, rb)
		}
	case hdrRecordBatch:
		m.batch, m.isBatch = hdr, true
		err = checkRecordBatch(b, hdr)
	}
	return m, err
}

// checkSchema validates a Schema table: its fields (recursively), metadata
// and features.
func checkSchema(b fbuf, sc table) error {
	if err := b.tables(sc, 1, func(f table) error { return checkField(b, f, 0) }); err != nil {
		return err
	}
	if err := checkKeyValues(b, sc, 2); err != nil {
		return err
	}
	_, _, err := b.vector(sc, 3, 8)
	return err
}

// checkFooter validates an Arrow IPC file's Footer flatbuffer the way
// checkMessage does a stream's messages: its schema, its blocks of
// dictionaries and record batches (24-byte structs) and its metadata.
func checkFooter(footer []byte) error {
	b := fbuf(footer)
	ft, err := b.root()
	if err != nil {
		return err
	}
	if sc, ok, err := b.subtable(ft, 1); err != nil {
		return err
	} else if ok {
		if err := checkSchema(b, sc); err != nil {
			return err
		}
	}
	for _, id := range []int{2, 3} {
		if _, _, err := b.vector(ft, id, 24); err != nil {
			return err
		}
	}
	return checkKeyValues(b, ft, 4)
}

func checkRecordBatch(b fbuf, rb table) error {
	for _, v := range [][2]int{{1, 16}, {2, 16}, {4, 8}} { // nodes, buffers, variadic counts
		if _, _, err := b.vector(rb, v[0], v[1]); err != nil {
			return err
		}
	}
	return nil
}

func checkField(b fbuf, f table, depth int) error {
	if depth > 64 {
		return errors.New("schema nested deeper than 64 levels")
	}
	if _, _, err := b.vector(f, 0, 1); err != nil { // name
		return err
	}
	if err := checkKeyValues(b, f, 6); err != nil {
		return err
	}
	if p := b.field(f, 2); p != 0 && p < len(b) && b[p] == typeUnion {
		if ut, ok, err := b.subtable(f, 3); err != nil {
			return err
		} else if ok {
			if _, _, err := b.vector(ut, 1, 4); err != nil { // typeIds
				return err
			}
		}
	}
	return b.tables(f, 5, func(c table) error { return checkField(b, c, depth+1) })
}

func checkKeyValues(b fbuf, t table, id int) error {
	return b.tables(t, id, func(kv table) error {
		if _, _, err := b.vector(kv, 0, 1); err != nil {
			return err
		}
		_, _, err := b.vector(kv, 1, 1)
		return err
	})
}

// CheckIPCSchema validates the first message of an in-memory Arrow IPC
// stream, a schema serialized the way Parquet's ARROW:schema metadata and
// Flight carry it, as the stream reader validates every message: arrow-go
// sizes allocations by the vector lengths in it, so a forged one would
// abort the process instead of failing the read.
func CheckIPCSchema(stream []byte) error {
	f := newFrameReader(bytes.NewReader(stream))
	defer f.Release()
	if _, err := f.Message(); err != nil {
		if err == io.EOF {
			return errors.New("no schema message")
		}
		return err
	}
	return nil
}

// maxCompressionRatio bounds what one compressed buffer may claim to expand
// to: a zstd RLE block turns 4 bytes into 128 KiB (32,768:1), LZ4 reaches
// about 255:1, so twice zstd's is more than any real buffer needs.
const maxCompressionRatio = 1 << 16

// checkCompressedBody validates a record or dictionary batch (m, of meta)
// whose body is compressed (Arrow's BodyCompression, lz4 or zstd): each
// buffer must lie inside the body, and the uncompressed length its first 8
// bytes claim (read by prefix at the buffer's offset in the body) must be
// one its compressed bytes can hold, because arrow-go allocates that length
// before decompressing. An uncompressed body needs nothing here.
func checkCompressedBody(meta []byte, m message, prefix func(off int64) (int64, error)) error {
	b, hdr, bodyLen := fbuf(meta), m.batch, m.bodyLen
	if !m.isBatch || b.field(hdr, 3) == 0 { // RecordBatch.compression
		return nil
	}
	start, n, err := b.vector(hdr, 2, 16) // buffers: {offset, length int64}
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		p := start + 16*i
		off := int64(binary.LittleEndian.Uint64(b[p:]))
		ln := int64(binary.LittleEndian.Uint64(b[p+8:]))
		if ln == 0 {
			continue
		}
		if off < 0 || ln < 0 || off > bodyLen || ln > bodyLen-off {
			return fmt.Errorf("buffer %d (offset %d, %d bytes) lies outside the message body of %d bytes", i, off, ln, bodyLen)
		}
		if ln < 8 {
			return fmt.Errorf("compressed buffer %d has %d bytes, fewer than its 8-byte length", i, ln)
		}
		u, err := prefix(off)
		if err != nil {
			return err
		}
		if u == -1 { // stored uncompressed
			continue
		}
		if limit := min(maxBodyBytes, (ln-8)*maxCompressionRatio+1<<16); u < 0 || u > limit {
			return fmt.Errorf("compressed buffer %d of %d bytes claims %d bytes uncompressed", i, ln, u)
		}
	}
	return nil
}

// fileBlock is a Block of an IPC file's footer: where a message starts, the
// length of its prefix and metadata, and the length of its body.
type fileBlock struct {
	offset  int64
	metaLen int32
	bodyLen int64
}

// footerRecordBlocks returns the record batch blocks of a footer that
// checkFooter accepted.
func footerRecordBlocks(footer []byte) ([]fileBlock, error) {
	b := fbuf(footer)
	ft, err := b.root()
	if err != nil {
		return nil, err
	}
	start, n, err := b.vector(ft, 3, 24)
	if err != nil {
		return nil, err
	}
	blocks := make([]fileBlock, n)
	for i := range blocks {
		p := start + 24*i
		blocks[i] = fileBlock{
			offset:  int64(binary.LittleEndian.Uint64(b[p:])),
			metaLen: int32(binary.LittleEndian.Uint32(b[p+8:])),
			bodyLen: int64(binary.LittleEndian.Uint64(b[p+16:])),
		}
	}
	return blocks, nil
}
