package trace

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/term"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/cleanup"
)

// BatchRows is the number of rows per record batch written by the typed
// writers: large enough to amortise per-batch cost on a pipe, small enough that
// memory stays flat.
const BatchRows = 32 * 1024

const ioBuffer = 1 << 20

// ErrTruncated is returned when an IPC stream ends without its end-of-stream
// marker, which is what a killed producer leaves behind.
var ErrTruncated = errors.New("Arrow stream ended without its end-of-stream marker (did the producing command fail?)")

// Format is a table file format chosen by file extension.
type Format struct {
	Name string
	Open func(path string) (BatchReader, error)
	// Write encodes a table onto w; Create manages the file around it.
	Write func(w io.Writer, schema *arrow.Schema) (Sink, error)
	// Rows, when set, returns the row count from the file's metadata
	// without reading the data (for CountRows).
	Rows func(path string) (int64, error)
}

// BatchReader is the minimal reading interface every format provides.
type BatchReader interface {
	Schema() *arrow.Schema
	// Next returns the next batch, valid until the following call, or io.EOF.
	Next() (arrow.RecordBatch, error)
	Close() error
}

// Sink receives record batches and must be closed to complete the output.
type Sink interface {
	Write(rec arrow.RecordBatch) error
	Close() error
}

var (
	formatsMu sync.Mutex
	formats   = map[string]Format{}
)

// RegisterFormat makes a format available for paths ending in ext (".parquet").
// Parquet registers itself from package trace/parquetio so that binaries
// which do not need it stay small.
func RegisterFormat(ext string, f Format) {
	formatsMu.Lock()
	defer formatsMu.Unlock()
	formats[strings.ToLower(ext)] = f
}

func formatFor(path string) (Format, bool) {
	ext := strings.ToLower(filepath.Ext(path))
	if ext == ".arrow" || ext == ".feather" || ext == ".arrows" || ext == ".ipc" {
		if ext == ".arrows" {
			return Format{}, false // explicit stream extension
		}
		return Format{Name: "arrow-file", Open: openIPCFile, Write: writeIPCFile}, true
	}
	formatsMu.Lock()
	defer formatsMu.Unlock()
	f, ok := formats[ext]
	if !ok && ext == ".parquet" {
		return Format{Name: "parquet"}, true // known but not linked in
	}
	return f, ok
}

// Source reads a table from a path ("-" or "" for stdin).
type Source struct {
	Path string
	r    BatchReader
	meta Meta
}

// Open opens path as a table: .arrow/.feather as an IPC file, .parquet as
// Parquet (when linked in), anything else, and "-", as an IPC stream.
func Open(path string, stdin io.Reader) (*Source, error) {
	name := path
	if path == "" || path == "-" {
		name = "<stdin>"
	}
	var (
		br  BatchReader
		err error
	)
	if f, ok := formatFor(path); ok && path != "-" {
		if f.Open == nil {
			return nil, fmt.Errorf("%s: %s is not supported by this tool; convert it first with blis-convert --format arrow %s -o out.arrow", name, f.Name, path)
		}
		br, err = f.Open(path)
	} else if path == "" || path == "-" {
		if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return nil, &InputError{Err: errors.New("no input: give a file, or pipe an Arrow stream into this command")}
		}
		br, err = openStdin(stdin)
	} else {
		var fh *os.File
		fh, err = os.Open(path)
		if err == nil {
			// An IPC or Parquet file under another name: go by the content.
			var magic [6]byte
			n, _ := fh.ReadAt(magic[:], 0)
			switch f, ok := formatFor("x.parquet"); {
			case n == 6 && string(magic[:]) == "ARROW1":
				fh.Close()
				br, err = openIPCFile(path)
			case n >= 4 && string(magic[:4]) == "PAR1" && ok && f.Open != nil:
				fh.Close()
				br, err = f.Open(path)
			default:
				br, err = openPlainOrGzip(fh)
			}
		}
	}
	if err != nil {
		if ne := notArrow(name, path, err); ne != nil {
			return nil, &InputError{Err: ne}
		}
		// An *fs.PathError already names the file: "x.arrow: no such file
		// or directory", not "x.arrow: open x.arrow: no such file ...".
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			return nil, &InputError{Err: fmt.Errorf("%s: %w", name, pe.Err)}
		}
		return nil, &InputError{Err: fmt.Errorf("%s: %w", name, err)}
	}
	md, err := MetaFromSchema(br.Schema())
	if err != nil {
		br.Close()
		return nil, &InputError{Err: fmt.Errorf("%s: %w", name, err)}
	}
	return &Source{Path: name, r: br, meta: md}, nil
}

// openPlainOrGzip reads a file with no table extension: an IPC stream, or
// any table compressed with gzip (results.arrows.gz).
func openPlainOrGzip(fh *os.File) (BatchReader, error) {
	var magic [2]byte
	if n, _ := fh.ReadAt(magic[:], 0); n == 2 && magic == gzipMagic {
		r, err := openStdin(fh)
		if err != nil {
			fh.Close()
			return nil, err
		}
		return &closeAlso{BatchReader: r, c: fh}, nil
	}
	return openStream(fh)
}

var gzipMagic = [2]byte{0x1f, 0x8b}

type closeAlso struct {
	BatchReader
	c io.Closer
}

func (r *closeAlso) Close() error {
	err := r.BatchReader.Close()
	if cerr := r.c.Close(); err == nil {
		err = cerr
	}
	return err
}

// openStdin reads an IPC stream from stdin; an IPC file or Parquet file
// piped in (`blis-sim < results.arrow`) is spooled to a temporary file,
// since both formats are read from their end. Gzip is undone first.
func openStdin(stdin io.Reader) (BatchReader, error) {
	br := bufio.NewReaderSize(stdin, ioBuffer)
	magic, _ := br.Peek(6)
	if len(magic) >= 2 && [2]byte{magic[0], magic[1]} == gzipMagic {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip-compressed data that cannot be decompressed: %w", err)
		}
		return openStdin(zr)
	}
	var f Format
	switch {
	case string(magic) == "ARROW1":
		f = Format{Name: "arrow-file", Open: openIPCFile}
	case len(magic) >= 4 && string(magic[:4]) == "PAR1":
		var ok bool
		if f, ok = formatFor("x.parquet"); !ok || f.Open == nil {
			return nil, errors.New("stdin holds Parquet, which this tool does not read: pipe it through blis-convert --format arrow")
		}
	default:
		return openStream(io.NopCloser(br))
	}
	tmp, err := os.CreateTemp("", "blis-stdin-*")
	if err != nil {
		return nil, err
	}
	forget := cleanup.Add(tmp.Name())
	defer tmp.Close()
	if _, err := io.Copy(tmp, br); err != nil {
		os.Remove(tmp.Name())
		forget()
		return nil, err
	}
	r, err := f.Open(tmp.Name())
	if err != nil {
		os.Remove(tmp.Name())
		forget()
		return nil, err
	}
	return &removeOnClose{BatchReader: r, path: tmp.Name(), forget: forget}, nil
}

type removeOnClose struct {
	BatchReader
	path   string
	forget func()
}

func (r *removeOnClose) Close() error {
	err := r.BatchReader.Close()
	os.Remove(r.path)
	r.forget()
	return err
}

// InputError marks an error in the content of an input table (corrupt,
// truncated, of the wrong kind or missing columns). Tools exit with status 2
// for it: running again on the same input cannot help.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// BadInput marks the error for cliutil's exit status.
func (e *InputError) BadInput() bool { return true }

// Schema returns the table schema.
func (s *Source) Schema() *arrow.Schema { return s.r.Schema() }

// Meta returns the table metadata (kind, provenance, ...).
func (s *Source) Meta() Meta { return s.meta }

// Next returns the next batch, valid until the following call, or io.EOF.
func (s *Source) Next() (arrow.RecordBatch, error) {
	rec, err := s.r.Next()
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%s: %w", s.Path, err)
		var pe *fs.PathError
		var errno syscall.Errno
		if errors.As(err, &pe) || errors.As(err, &errno) {
			return nil, err // the system failed, not the data
		}
		return nil, &InputError{Err: err}
	}
	if err == nil {
		if verr := checkBatch(rec); verr != nil {
			return nil, &InputError{Err: fmt.Errorf("%s: %w", s.Path, verr)}
		}
	}
	return rec, err
}

// Close releases the source.
func (s *Source) Close() error { return s.r.Close() }

// recycleBodies lets a stream read each batch into the memory of an
// earlier batch once no reference to it is left (Arrow's reference counts
// say so), instead of fresh memory every batch. Only for a reader that
// copies every value out of a batch before asking for the next and keeps
// a batch only by retaining it: a string taken from a batch without a copy
// would change under its holder.
func (s *Source) recycleBodies() {
	if r, ok := s.r.(interface{ recycleBodies() }); ok {
		r.recycleBodies()
	}
}

// Expect returns an error unless the table is of the given kind. Tables with
// no blis.table key (written by other tools) are accepted.
func (s *Source) Expect(table string) error {
	got := s.meta.Table()
	if got != "" && got != table {
		return &InputError{Err: fmt.Errorf("%s: is a %s table, expected a %s table", s.Path, got, table)}
	}
	return nil
}

type streamReader struct {
	rd *ipc.Reader
	c  io.Closer
	fr *frameReader
}

func openStream(rc io.ReadCloser) (BatchReader, error) {
	br := bufio.NewReaderSize(rc, ioBuffer)
	if head, _ := br.Peek(sniffLen); len(head) > 0 {
		if what := sniff(head); what != "" {
			rc.Close()
			return nil, &notArrowError{what: what}
		}
	}
	fr := newFrameReader(br)
	rd, err := ipc.NewReaderFromMessageReader(fr)
	if err != nil {
		rc.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, ErrTruncated) {
			if fr.read {
				return nil, ErrTruncated // cut inside the schema message
			}
			return nil, errors.New("empty input: expected an Arrow IPC stream")
		}
		return nil, fmt.Errorf("not an Arrow IPC stream: %w", err)
	}
	return &streamReader{rd: rd, c: rc, fr: fr}, nil
}

// recycleBodies lets the next message reuse the memory of a batch nobody
// holds any more (see Source.recycleBodies).
func (s *streamReader) recycleBodies() { s.fr.pool = newRecycler() }

func (s *streamReader) Schema() *arrow.Schema { return s.rd.Schema() }
func (s *streamReader) Next() (arrow.RecordBatch, error) {
	if s.rd.Next() {
		return s.rd.RecordBatch(), nil
	}
	if err := s.rd.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}
func (s *streamReader) Close() error { s.rd.Release(); return s.c.Close() }

type fileReader struct {
	f      *os.File
	fr     *ipc.FileReader
	i      int
	cur    arrow.RecordBatch
	blocks []fileBlock // the footer's record batches (checkBlock)
	size   int64
}

func openIPCFile(path string) (BatchReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// `tool > x.arrow` puts a stream under a file name: go by the content.
	var magic [6]byte
	if n, _ := f.ReadAt(magic[:], 0); n < len(magic) || string(magic[:]) != "ARROW1" {
		return openStream(f)
	}
	blocks, size, err := checkFileFooter(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("not an Arrow IPC file: %w", err)
	}
	fr, err := newFileReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("not an Arrow IPC file: %w", err)
	}
	return &fileReader{f: f, fr: fr, blocks: blocks, size: size}, nil
}

// newFileReader is ipc.NewFileReader, whose reading of the schema and
// dictionaries (unlike its stream reader and record batches) does not
// recover from the panics a corrupt type table raises in flatbuffers.
func newFileReader(f *os.File) (fr *ipc.FileReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			fr, err = nil, fmt.Errorf("corrupt schema or dictionary: %v", p)
		}
	}()
	return ipc.NewFileReader(f)
}

// checkFileFooter reads an IPC file's footer (its flatbuffer, then its
// int32 length and the magic "ARROW1" at the end) and checks it before
// arrow-go sizes allocations by what it claims. It returns the footer's
// record batch blocks and the file's size, for checkBlock.
func checkFileFooter(f *os.File) ([]fileBlock, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	var tail [10]byte
	if st.Size() < 6+int64(len(tail)) {
		return nil, 0, errors.New("too short for an Arrow IPC file")
	}
	if _, err := f.ReadAt(tail[:], st.Size()-int64(len(tail))); err != nil {
		return nil, 0, err
	}
	if string(tail[4:]) != "ARROW1" {
		return nil, 0, errors.New("no ARROW1 magic at its end")
	}
	n := int64(int32(binary.LittleEndian.Uint32(tail[:4])))
	if n <= 0 || n > st.Size()-6-int64(len(tail)) || n > maxMetadataBytes {
		return nil, 0, fmt.Errorf("footer length %d in a file of %d bytes", n, st.Size())
	}
	footer := make([]byte, n)
	if _, err := f.ReadAt(footer, st.Size()-int64(len(tail))-n); err != nil {
		return nil, 0, err
	}
	if err := checkFooter(footer); err != nil {
		return nil, 0, fmt.Errorf("footer: %w", err)
	}
	blocks, err := footerRecordBlocks(footer)
	if err != nil {
		return nil, 0, fmt.Errorf("footer: %w", err)
	}
	return blocks, st.Size(), nil
}

// checkBlock validates record batch i's message before arrow-go reads it:
// arrow-go's file reader, unlike the stream reader we frame ourselves,
// sizes allocations by the message's vector lengths and, in a compressed
// body, by each buffer's claimed uncompressed length.
func (r *fileReader) checkBlock(i int) error {
	if i >= len(r.blocks) {
		return nil // arrow-go counts the same footer's blocks: not reached
	}
	blk := r.blocks[i]
	if blk.offset < 0 || blk.metaLen < 8 || int64(blk.metaLen) > maxMetadataBytes || blk.bodyLen < 0 ||
		blk.bodyLen > maxBodyBytes || blk.offset > r.size-int64(blk.metaLen)-blk.bodyLen {
		return fmt.Errorf("block at offset %d (%d bytes of metadata, %d of body) outside the file of %d bytes", blk.offset, blk.metaLen, blk.bodyLen, r.size)
	}
	meta := make([]byte, blk.metaLen)
	if _, err := r.f.ReadAt(meta, blk.offset); err != nil {
		return err
	}
	// The prefix as arrow-go strips it: the continuation token and the
	// length, or a bare length (files before Arrow 0.15).
	if binary.LittleEndian.Uint32(meta) == contToken {
		meta = meta[8:]
	} else {
		meta = meta[4:]
	}
	m, err := checkMessage(meta)
	if err != nil {
		return err
	}
	m.bodyLen = blk.bodyLen // arrow-go reads the block's body length
	body := blk.offset + int64(blk.metaLen)
	return checkCompressedBody(meta, m, func(off int64) (int64, error) {
		var p [8]byte
		if _, err := r.f.ReadAt(p[:], body+off); err != nil {
			return 0, err
		}
		return int64(binary.LittleEndian.Uint64(p[:])), nil
	})
}

func (r *fileReader) Schema() *arrow.Schema { return r.fr.Schema() }
func (r *fileReader) Next() (arrow.RecordBatch, error) {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.i >= r.fr.NumRecords() {
		return nil, io.EOF
	}
	// RecordBatchAt hands the batch to us; RecordBatch would also release
	// the previous one itself, so with our own Release a batch retained by
	// a consumer (blis-report reads ahead) was freed under it.
	rec, err := r.recordBatchAt(r.i)
	if err != nil {
		return nil, err
	}
	r.i++
	r.cur = rec
	return rec, nil
}

// recordBatchAt is RecordBatchAt, which reads a batch's message through
// flatbuffers without the recover its stream reader has: a corrupt message
// table would panic there.
func (r *fileReader) recordBatchAt(i int) (rec arrow.RecordBatch, err error) {
	if err := r.checkBlock(i); err != nil {
		return nil, fmt.Errorf("record batch %d: corrupt message: %w", i, err)
	}
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, fmt.Errorf("record batch %d: corrupt message: %v", i, p)
		}
	}()
	return r.fr.RecordBatchAt(i)
}

func (r *fileReader) Close() error {
	if r.cur != nil {
		r.cur.Release()
	}
	r.fr.Close()
	return r.f.Close()
}

// Create opens an output: "-" or "" is an IPC stream on stdout (refused when
// stdout is a terminal); a path is written in the format its extension names
// (a stream when none does). A regular file is written under a temporary
// name beside it and renamed into place by Close, so a failed run (Abort)
// neither leaves a partial table nor removes an earlier one; through a
// symbolic link the target is replaced and the link kept; a device or FIFO
// (-o /dev/null) is written in place.
func Create(path string, stdout io.Writer, schema *arrow.Schema) (Sink, error) {
	return CreateLate(path, stdout, schema, nil)
}

// CreateLate is Create for a table whose schema metadata is complete only
// later (blis-sim's provenance waits for the hash of its input, computed
// beside the run): schema gives the columns, and final, called once, the
// schema to write, with the same columns. An IPC stream calls final when
// it writes its header, with the first batch or at Close; other formats
// call it at once. A nil final is Create.
func CreateLate(path string, stdout io.Writer, schema *arrow.Schema, final func() *arrow.Schema) (Sink, error) {
	if path == "" || path == "-" {
		if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return nil, badinput.Errorf("refusing to write binary Arrow to a terminal: pipe it into another blis tool (e.g. | blis-report) or use -o FILE")
		}
		return writeLateStream(stdout, schema, final), nil
	}
	write := func(w io.Writer, schema *arrow.Schema) (Sink, error) { return writeLateStream(w, schema, final), nil }
	if f, ok := formatFor(path); ok {
		if f.Write == nil {
			return nil, fmt.Errorf("%s: %s output is not supported by this tool; write .arrow and convert with blis-convert", path, f.Name)
		}
		write = f.Write
		if final != nil {
			schema = final()
		}
	}
	out, err := CreateFile(path)
	if err != nil {
		return nil, err
	}
	// Formats that close what they write to must not close the file.
	inner, err := write(struct{ io.Writer }{out.f}, schema)
	if err != nil {
		out.Abort()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &fileOutput{Sink: inner, out: out}, nil
}

// Abort ends an output of a failed run: a file output is removed (an earlier
// file at the path is left as it was); a stream is left without its
// end-of-stream marker, so the next stage reports it as truncated.
func Abort(s Sink) {
	if a, ok := s.(interface{ Abort() }); ok {
		a.Abort()
	}
}

// writeLateStream writes an IPC stream whose header is final's schema
// (schema's when final is nil); arrow's writer writes it with the first
// batch, or at Close.
func writeLateStream(w io.Writer, schema *arrow.Schema, final func() *arrow.Schema) Sink {
	bw := bufio.NewWriterSize(w, ioBuffer)
	s := &streamSink{bw: bw, final: final}
	if final == nil {
		s.start(schema)
	}
	return s
}

type streamSink struct {
	w      *ipc.Writer
	bw     *bufio.Writer
	final  func() *arrow.Schema // the header's schema, until w is made
	closed bool
	err    error
}

func (s *streamSink) start(schema *arrow.Schema) {
	s.w = ipc.NewWriter(s.bw, ipc.WithSchema(schema), ipc.WithDictionaryDeltas(true))
	s.final = nil
}

func (s *streamSink) writer() *ipc.Writer {
	if s.w == nil {
		s.start(s.final())
	}
	return s.w
}

func (s *streamSink) Write(rec arrow.RecordBatch) error { return s.writer().Write(rec) }
func (s *streamSink) Close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	s.err = s.writer().Close()
	if ferr := s.bw.Flush(); s.err == nil {
		s.err = ferr
	}
	return s.err
}

// Abort flushes what was written but no end-of-stream marker.
func (s *streamSink) Abort() { s.bw.Flush() }

type fileOutput struct {
	Sink
	out      *OutputFile
	finished bool
	err      error
}

// finish completes the table in the temporary file.
func (o *fileOutput) finish() error {
	if !o.finished {
		o.finished = true
		o.err = o.Sink.Close()
	}
	return o.err
}

func (o *fileOutput) Close() error { return o.out.Commit(o.finish()) }
func (o *fileOutput) Abort()       { o.out.Abort() }

// Hold wraps an output from Create for a table writer: the writer's Close
// completes the table but leaves it under its temporary name; Close on the
// output itself then puts it into place, or Abort discards it. A tool
// writing several tables (blis-sim's -o and --steps) so puts all of them in
// place or none. A stream is complete (and stays so) at the writer's Close.
func Hold(s Sink) Sink { return held{s} }

type held struct{ Sink }

func (h held) Close() error {
	if f, ok := h.Sink.(interface{ finish() error }); ok {
		return f.finish()
	}
	return h.Sink.Close()
}

func (h held) Abort() { Abort(h.Sink) }

// OutputFile is a file being written for a path: a temporary file beside
// the (symlink-resolved) destination, or the destination itself when it is
// a device or FIFO. Tools writing non-table outputs (HTML, YAML) use it too.
type OutputFile struct {
	f      *os.File
	dest   string // rename target; "" when writing in place
	path   string // as the user gave it, for messages
	forget func() // unregisters the temporary file from lib/cleanup
}

// CreateFile opens an output file for path (see Create).
func CreateFile(path string) (*OutputFile, error) {
	dest := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		dest = r
	}
	if fi, err := os.Stat(dest); err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return nil, fmt.Errorf("%s: is a directory", path)
		}
		f, err := os.OpenFile(dest, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &OutputFile{f: f, path: path, forget: func() {}}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: %w", path, pe.Err) // name the user's path, not ours
		}
		return nil, err
	}
	// An interrupted or crashing tool removes it (see lib/cleanup).
	return &OutputFile{f: f, dest: dest, path: path, forget: cleanup.Add(f.Name())}, nil
}

// File is the open file to write to.
func (o *OutputFile) File() *os.File { return o.f }

// Commit completes the output when err is nil (renaming it into place as an
// ordinary 0644 file), or aborts it and returns err.
func (o *OutputFile) Commit(err error) error {
	if err != nil {
		o.Abort()
		return fmt.Errorf("%s: %w", o.path, err)
	}
	if o.dest == "" {
		return o.f.Close()
	}
	if err := o.f.Chmod(0o644); err != nil { // CreateTemp makes 0600 files
		o.Abort()
		return err
	}
	if err := o.f.Close(); err != nil {
		o.Abort()
		return fmt.Errorf("%s: %w", o.path, err)
	}
	if err := os.Rename(o.f.Name(), o.dest); err != nil {
		o.Abort()
		return fmt.Errorf("%s: %w", o.path, err)
	}
	o.forget()
	return nil
}

// Abort closes the output and removes a temporary file.
func (o *OutputFile) Abort() {
	o.f.Close()
	if o.dest != "" {
		os.Remove(o.f.Name())
	}
	o.forget()
}

type fileSink struct {
	w      *ipc.FileWriter
	schema *arrow.Schema
}

func writeIPCFile(w io.Writer, schema *arrow.Schema) (Sink, error) {
	plain := PlainSchema(schema)
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(plain))
	if err != nil {
		return nil, err
	}
	return &fileSink{w: fw, schema: plain}, nil
}

func (s *fileSink) Write(rec arrow.RecordBatch) error {
	p, err := PlainBatch(s.schema, rec)
	if err != nil {
		return err
	}
	defer p.Release()
	return s.w.Write(p)
}

func (s *fileSink) Close() error { return s.w.Close() }

// PlainSchema replaces dictionary-encoded columns by their value type. File
// formats need it: their dictionaries cannot grow between batches, while the
// typed writers discover values as they go.
func PlainSchema(s *arrow.Schema) *arrow.Schema {
	fs := make([]arrow.Field, len(s.Fields()))
	for i, f := range s.Fields() {
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			f.Type = dt.ValueType
		}
		fs[i] = f
	}
	md := s.Metadata()
	return arrow.NewSchema(fs, &md)
}

// PlainBatch decodes the dictionary columns of rec to match plain (a schema
// from PlainSchema). The caller releases the result.
func PlainBatch(plain *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c := rec.Column(i)
		if d, ok := c.(*array.Dictionary); ok {
			out, err := undict(d)
			if err != nil {
				return nil, fmt.Errorf("decoding dictionary column %s: %w", rec.ColumnName(i), err)
			}
			cols[i] = out
			continue
		}
		c.Retain()
		cols[i] = c
	}
	return array.NewRecordBatch(plain, cols, rec.NumRows()), nil
}

// Alloc is the allocator used by the typed writers.
var Alloc memory.Allocator = memory.DefaultAllocator

func undict(d *array.Dictionary) (arrow.Array, error) {
	vals, ok := d.Dictionary().(*array.String)
	if !ok {
		return nil, fmt.Errorf("dictionary of %s, expected strings", d.Dictionary().DataType())
	}
	b := array.NewStringBuilder(Alloc)
	defer b.Release()
	b.Reserve(d.Len())
	for i := 0; i < d.Len(); i++ {
		if d.IsNull(i) {
			b.AppendNull()
			continue
		}
		b.Append(vals.Value(d.GetValueIndex(i)))
	}
	return b.NewArray(), nil
}
