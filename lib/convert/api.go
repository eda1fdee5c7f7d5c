package convert

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/cleanup"
	"github.com/blis-sim/blis/lib/trace"
	"golang.org/x/term"
)

// input is one opened source, buffered so that detection can peek.
type input struct {
	path string // as given ("-" for stdin)
	name string // for messages
	br   *bufio.Reader
	c    io.Closer
	gz   bool // br is the decompressed content
}

const (
	peekBytes  = 64 << 10
	readBuffer = 128 << 10 // large enough to amortise reads, small enough to allocate cheaply
)

func openInput(path string, stdin io.Reader) (*input, error) {
	in := &input{path: path, name: path}
	var r io.Reader
	if path == "-" || path == "" {
		in.path, in.name = "-", "<stdin>"
		if f, ok := stdin.(*os.File); ok && isTerminal(f) {
			return nil, usageErr("no input: give a trace file, or pipe one into this command")
		}
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, badinput.Wrap(err)
		}
		in.c = f
		r = f
	}
	in.br = bufio.NewReaderSize(r, readBuffer)
	if b, _ := in.br.Peek(2); len(b) == 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(in.br)
		if err != nil {
			in.close()
			return nil, badinput.Errorf("%s: gzip: %v", in.name, err)
		}
		in.br = bufio.NewReaderSize(zr, readBuffer)
		in.gz = true
	}
	return in, nil
}

func (in *input) close() {
	if in.c != nil {
		in.c.Close()
	}
}

func (in *input) head() []byte {
	b, _ := in.br.Peek(peekBytes)
	return b
}

// Formats lists the format names accepted by --format.
var Formats = []string{"azure", "burstgpt", "mooncake", "qwen", "weka", "vllm-bench", "inference-perf", "llmservingsim", "vidur", "splitwise", "otel", "csv", "jsonl", "arrow"}

type newParserFunc func(in *input, opts *Options) (parser, error)

var parsers = map[string]newParserFunc{
	"azure":          newAzure,
	"burstgpt":       newBurstGPT,
	"vidur":          newVidur,
	"splitwise":      newSplitwise,
	"csv":            newGenericCSV,
	"mooncake":       newMooncake,
	"qwen":           newQwen,
	"llmservingsim":  newLLMServingSim,
	"jsonl":          newGenericJSONL,
	"weka":           newWeka,
	"vllm-bench":     newVLLMBench,
	"inference-perf": newInferencePerf,
	"otel":           newOTel,
}

func isArrowPath(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".arrow", ".feather", ".arrows", ".ipc", ".parquet":
		return true
	}
	return false
}

// isArrowBytes recognises an Arrow IPC stream or file, or Parquet.
func isArrowBytes(b []byte) bool {
	return bytes.HasPrefix(b, []byte{0xff, 0xff, 0xff, 0xff}) || bytes.HasPrefix(b, []byte("ARROW1")) || bytes.HasPrefix(b, []byte("PAR1"))
}

// Convert converts opts.Inputs into a requests table written to out ("-" or
// "" for an Arrow stream on stdout, else a file chosen by extension).
func Convert(opts Options, out string, stdin io.Reader, stdout io.Writer) (*Stats, error) {
	if len(opts.Inputs) == 0 {
		opts.Inputs = []string{"-"}
	}
	if opts.Tool == "" {
		opts.Tool = "blis-convert"
	}
	if err := checkOptions(&opts); err != nil {
		return &Stats{}, err
	}
	if opts.Format == "arrow" || (opts.Format == "" && len(opts.Inputs) == 1 && isArrowPath(opts.Inputs[0])) {
		return reencode(&opts, out, stdin, stdout)
	}
	if opts.Format == "" && len(opts.Inputs) == 1 {
		in, err := openInput(opts.Inputs[0], stdin)
		if err != nil {
			return &Stats{}, err
		}
		if isArrowBytes(in.head()) {
			defer in.close()
			return reencodeInput(&opts, in, out, stdout)
		}
		in.close()
		if in.path == "-" {
			stdin = in.br // detection peeked into stdin: hand the buffer on
		}
	}
	open := func(md trace.Meta) (rowSink, error) {
		schema := trace.RequestsSchema(md)
		path := out
		sink, err := trace.Create(path, stdout, schema)
		if err != nil {
			if path == "" || path == "-" {
				return nil, badinput.Wrap(err) // refused a terminal
			}
			return nil, err
		}
		return trace.NewRequestWriter(sink, schema), nil
	}
	return convertWith(opts, stdin, open)
}

func describe(paths []string) ([]trace.Input, error) {
	var out []trace.Input
	for _, p := range paths {
		d, err := trace.DescribeInput(p)
		if err != nil {
			return nil, badinput.Wrap(err)
		}
		out = append(out, d)
	}
	return out, nil
}

func checkOptions(o *Options) error {
	switch {
	case !(o.Speedup >= 0) || math.IsInf(o.Speedup, 0): // also NaN
		return usageErr("--speedup: expected a positive factor, found %g", o.Speedup)
	case !(o.Sample >= 0 && o.Sample <= 1):
		return usageErr("--sample: expected a probability in (0, 1], found %g", o.Sample)
	case o.Limit < 0:
		return usageErr("--limit: expected a positive number of rows, found %d", o.Limit)
	case o.SessionGap < 0:
		return usageErr("--session-gap: expected a duration >= 0, found %s", time.Duration(o.SessionGap)*time.Microsecond)
	case o.BlockSize < 0:
		return usageErr("--block-size: expected a positive number of tokens, found %d", o.BlockSize)
	}
	if o.Format != "" && o.Format != "arrow" {
		if _, ok := parsers[o.Format]; !ok {
			return usageErr("--format: unknown format %q (known: %s)", o.Format, strings.Join(Formats, ", "))
		}
	}
	return nil
}

// reencode copies an Arrow/Parquet requests table to out (e.g. Parquet to a
// stream), validating every row and applying the replay options.
func reencode(opts *Options, out string, stdin io.Reader, stdout io.Writer) (*Stats, error) {
	if len(opts.Inputs) != 1 {
		return &Stats{}, usageErr("--format arrow takes one input")
	}
	in, err := openInput(opts.Inputs[0], stdin)
	if err != nil {
		return &Stats{}, err
	}
	defer in.close()
	return reencodeInput(opts, in, out, stdout)
}

func reencodeInput(opts *Options, in *input, out string, stdout io.Writer) (*Stats, error) {
	src, cleanup, err := openTable(in)
	if err != nil {
		return &Stats{}, err
	}
	defer cleanup()
	return reencodeSource(opts, src, out, stdout)
}

// tableExt is the extension lib/trace opens a table's layout by: ".arrow"
// for an IPC file, ".parquet" for Parquet, "" for an IPC stream.
func tableExt(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("ARROW1")):
		return ".arrow"
	case bytes.HasPrefix(head, []byte("PAR1")):
		return ".parquet"
	}
	return ""
}

// openTable opens the Arrow/Parquet requests table of an opened input (gzip
// undone, first bytes peeked). A stream is read straight from the input. IPC
// files and Parquet need random access and are opened by extension, so stdin
// or a gzipped file is spooled to a temporary file, and a file saved under
// another extension is reached through a symlink that has the right one.
func openTable(in *input) (*trace.Source, func(), error) {
	noop := func() {}
	ext := tableExt(in.head())
	named := func(src *trace.Source, err error) (*trace.Source, func(), error) {
		if err != nil {
			msg := err.Error()
			if i := strings.Index(msg, ": "); i >= 0 {
				msg = in.name + msg[i:] // name the input, not a temporary file
			}
			return nil, noop, badinput.Errorf("%s", msg)
		}
		src.Path = in.name
		return src, noop, nil
	}
	if ext == "" {
		return named(trace.Open("-", in.br))
	}
	own := strings.ToLower(filepath.Ext(in.path))
	if !in.gz && in.path != "-" && (own == ext || ext == ".arrow" && own == ".feather") {
		return named(trace.Open(in.path, nil))
	}
	dir, err := os.MkdirTemp("", "blis-convert-")
	if err != nil {
		return nil, noop, err
	}
	forget := cleanup.Add(dir)
	cleanup := func() { os.RemoveAll(dir); forget() }
	tmp := filepath.Join(dir, "table"+ext)
	if in.gz || in.path == "-" {
		f, err := os.Create(tmp)
		rd := &readErr{r: in.br}
		if err == nil {
			_, err = io.Copy(f, rd)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if rd.err != nil {
			// The input's fault (a truncated .gz): bad input, named as
			// the other tools name it.
			cleanup()
			return nil, noop, badinput.Errorf("%s: reading the %s table: %w (truncated or corrupt?)", in.name, ext[1:], rd.err)
		}
		if err != nil {
			cleanup()
			return nil, noop, fmt.Errorf("%s: spooling the %s table to a temporary file: %w", in.name, ext[1:], err)
		}
	} else {
		abs, err := filepath.Abs(in.path)
		if err == nil {
			err = os.Symlink(abs, tmp)
		}
		if err != nil {
			cleanup()
			return nil, noop, err
		}
	}
	src, _, err := named(trace.Open(tmp, nil))
	if err != nil {
		cleanup()
		return nil, noop, err
	}
	return src, cleanup, nil
}

func reencodeSource(opts *Options, src *trace.Source, out string, stdout io.Writer) (*Stats, error) {
	defer src.Close()
	if kind := src.Meta().Table(); kind != "" && kind != trace.TableRequests {
		return copyTable(opts, src, kind, out, stdout)
	}
	rr, err := trace.NewRequestReader(src)
	if err != nil {
		return &Stats{}, badinput.Wrap(err)
	}
	descs, err := describe(opts.Inputs)
	if err != nil {
		return &Stats{}, err
	}
	in := src.Meta()
	ap := &arrowParser{rr: rr, name: src.Path, in: in}
	if st, err := time.Parse(time.RFC3339Nano, in.Get(trace.MetaStartTime)); err == nil {
		// Times become absolute again so that --start/--end and the new
		// blis.start_time account for the source's origin.
		ap.origin, ap.epoch = st.UnixMicro(), true
	}
	open := func(md trace.Meta) (rowSink, error) {
		// Keep the source's metadata and provenance chain, then ours.
		full := in.With(md.Provenance[len(md.Provenance)-1])
		if v := md.Get(trace.MetaStartTime); v != "" {
			full.Set(trace.MetaStartTime, v)
		}
		if v := md.Get(trace.MetaTimeScale); v != "" {
			scale := opts.Speedup
			var old float64
			if _, err := fmt.Sscan(in.Get(trace.MetaTimeScale), &old); err == nil && old > 0 {
				scale *= old // scaling an already scaled table compounds
			}
			full.Set(trace.MetaTimeScale, strconv.FormatFloat(scale, 'g', -1, 64))
		}
		schema := trace.RequestsSchema(full)
		sink, err := trace.Create(out, stdout, schema)
		if err != nil {
			return nil, err
		}
		return trace.NewRequestWriter(sink, schema), nil
	}
	return run(opts, []parser{ap}, descs, open)
}

// copyTable writes a table of another kind (results, steps, chunks, ...)
// in the output's format with its columns and metadata unchanged, adding
// this run to its provenance: blis-convert changes only the format of the
// tables it does not convert. The replay options, which select and retime
// requests, are refused rather than ignored.
func copyTable(opts *Options, src *trace.Source, kind, out string, stdout io.Writer) (*Stats, error) {
	for _, o := range []struct {
		name string
		set  bool
	}{
		{"--start", opts.Start != ""}, {"--end", opts.End != ""}, {"--limit", opts.Limit != 0},
		{"--speedup", opts.Speedup != 0 && opts.Speedup != 1}, {"--sample", opts.Sample != 0},
		{"--filter-model", opts.FilterModel != ""}, {"--sort", opts.Sort}, {"--block-size", opts.BlockSize != 0},
	} {
		if o.set {
			return &Stats{}, usageErr("%s: %s applies to requests tables; %s is a %s table, which blis-convert only copies to another format", src.Path, o.name, src.Path, kind)
		}
	}
	descs, err := describe(opts.Inputs)
	if err != nil {
		return &Stats{}, err
	}
	md := src.Meta().With(trace.Stage{Tool: opts.Tool, Version: trace.Version, Args: opts.Args, Inputs: descs})
	sink, err := trace.Create(out, stdout, trace.WithMeta(src.Schema(), md, kind))
	if err != nil {
		if out == "" || out == "-" {
			return &Stats{}, badinput.Wrap(err) // refused a terminal
		}
		return &Stats{}, err
	}
	n, err := trace.Copy(src, sink)
	return &Stats{Read: n, Written: n}, err
}

// arrowParser reads rows of an existing requests table back as Rows. Times
// are already relative µs; dependents take their session's last root time.
type arrowParser struct {
	rr     *trace.RequestReader
	name   string
	in     trace.Meta
	buf    []trace.Request
	i      int
	lastT  int64
	eof    bool
	origin int64 // µs since the epoch of arrival_us = 0, when known
	epoch  bool
}

func (a *arrowParser) meta() formatMeta {
	fm := formatMeta{name: a.in.Get(trace.MetaSourceFormat), epoch: a.epoch}
	if fm.name == "" {
		fm.name = "arrow"
	}
	fmt.Sscan(a.in.Get(trace.MetaPrefixBlockSize), &fm.blockSize)
	return fm
}

func (a *arrowParser) path() string { return a.name }

func (a *arrowParser) next(r *Row) error {
	for a.i >= len(a.buf) {
		if a.eof {
			return io.EOF
		}
		var err error
		a.buf, err = a.rr.Next(a.buf)
		a.i = 0
		if err == io.EOF {
			a.eof = true
			continue
		}
		if err != nil {
			return badinput.Wrap(err)
		}
	}
	r.Request = a.buf[a.i]
	a.i++
	if r.ArrivalUS != trace.Null {
		a.lastT = a.origin + r.ArrivalUS
	}
	r.T = a.lastT
	return nil
}

// countSink counts rows instead of writing them.
type countSink struct{ n *int64 }

func (c countSink) Write(*trace.Request) error { *c.n++; return nil }
func (c countSink) Close() error               { return nil }

// Count returns the number of rows in an Arrow/Parquet requests table
// (checked with ValidateTable) or that a trace converts to with opts.
func Count(opts Options, stdin io.Reader) (int64, *Stats, error) {
	if len(opts.Inputs) == 0 {
		opts.Inputs = []string{"-"}
	}
	if opts.Tool == "" {
		opts.Tool = "blis-convert"
	}
	count := func(in *input) (int64, *Stats, error) {
		defer in.close()
		src, cleanup, err := openTable(in)
		if err != nil {
			return 0, &Stats{}, err
		}
		defer cleanup()
		defer src.Close()
		n, err := ValidateTable(src)
		return n, &Stats{Written: n}, err
	}
	if len(opts.Inputs) == 1 && (opts.Format == "arrow" || opts.Format == "" && isArrowPath(opts.Inputs[0])) {
		in, err := openInput(opts.Inputs[0], stdin)
		if err != nil {
			return 0, &Stats{}, err
		}
		return count(in)
	}
	if len(opts.Inputs) == 1 && opts.Format == "" {
		in, err := openInput(opts.Inputs[0], stdin)
		if err != nil {
			return 0, &Stats{}, err
		}
		if isArrowBytes(in.head()) {
			return count(in)
		}
		in.close()
		if opts.Inputs[0] == "-" {
			// Detection consumed the peeked bytes of stdin: hand them on.
			stdin = in.br
		}
	}
	var n int64
	st, err := convertWith(opts, stdin, func(trace.Meta) (rowSink, error) { return countSink{&n}, nil })
	return n, st, err
}

// convertWith is Convert with a caller-provided sink (used by Count and tests).
func convertWith(opts Options, stdin io.Reader, open func(trace.Meta) (rowSink, error)) (*Stats, error) {
	if err := checkOptions(&opts); err != nil {
		return &Stats{}, err
	}
	var (
		ps     []parser
		format string
		first  string
	)
	for _, p := range opts.Inputs {
		in, err := openInput(p, stdin)
		if err != nil {
			return &Stats{}, err
		}
		defer in.close()
		f := opts.Format
		if f == "" {
			if f, err = Detect(in.name, in.head(), &opts); err != nil {
				return &Stats{}, err
			}
		}
		if format == "" {
			format, first = f, in.name
		} else if f != format {
			return &Stats{}, usageErr("%s is %s but %s is %s: convert different formats separately", first, format, in.name, f)
		}
		mk, ok := parsers[f]
		if !ok {
			return &Stats{}, usageErr("--format: unknown format %q (known: %s)", f, strings.Join(Formats, ", "))
		}
		p1, err := mk(in, &opts)
		if err != nil {
			return &Stats{}, err
		}
		ps = append(ps, p1)
	}
	if len(ps) > 1 {
		if format != "weka" {
			return &Stats{}, usageErr("the %s format takes one input; only weka (Claude Code) traces take several files", format)
		}
		m, err := mergeWeka(ps, opts.SessionGap)
		if err != nil {
			return &Stats{}, err
		}
		ps = []parser{m}
	}
	descs, err := describe(opts.Inputs)
	if err != nil {
		return &Stats{}, err
	}
	return run(&opts, ps, descs, open)
}

func countRows(src *trace.Source) (int64, error) {
	var n int64
	for {
		rec, err := src.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, badinput.Wrap(err)
		}
		n += rec.NumRows()
	}
}

// ValidateTable reads a whole requests table and checks every row (values,
// unique ids, depends_on naming earlier rows, and the blis.sorted and
// blis.prefix_unique promises when the table makes them). It returns the
// row count.
func ValidateTable(src *trace.Source) (int64, error) {
	if kind := src.Meta().Table(); kind != "" && kind != trace.TableRequests && kind != trace.TableResults {
		return countRows(src) // other tables: checked batch by batch only
	}
	rr, err := trace.NewRequestReader(src)
	if err != nil {
		return 0, badinput.Wrap(err)
	}
	// Results come in the order requests end (blis-sim once copied its
	// input's promise onto them): only a requests table is held to it.
	sorted := src.Meta().Get(trace.MetaSorted) == "arrival" && src.Meta().Table() != trace.TableResults
	unique, err := src.Meta().PrefixUnique()
	if err != nil {
		return 0, badinput.Errorf("%s: %w", src.Path, err)
	}
	firsts := map[uint64]string{} // first prefix hash → the row's id (blis.prefix_unique)
	seen := map[string]struct{}{}
	var (
		buf   []trace.Request
		n     int64
		lastA int64 = -1 << 62
	)
	for {
		buf, err = rr.Next(buf)
		for i := range buf {
			r := &buf[i]
			n++
			if _, dup := seen[r.ID]; dup {
				return n, badinput.Errorf("%s: row %d: column %s: expected a unique id, found %q again", src.Path, n, trace.ColRequestID, r.ID)
			}
			for _, d := range r.DependsOn {
				if _, ok := seen[d]; !ok {
					return n, badinput.Errorf("%s: row %d (request %s): column %s: expected ids of earlier rows, found %q", src.Path, n, r.ID, trace.ColDependsOn, d)
				}
			}
			seen[r.ID] = struct{}{}
			if unique && len(r.PrefixHashes) > 0 {
				if other, dup := firsts[r.PrefixHashes[0]]; dup {
					return n, badinput.Errorf("%s: row %d (request %s): column %s: expected a first entry no other row has (the table promises %s=true), found %d, as request %s", src.Path, n, r.ID, trace.ColPrefixHashes, trace.MetaPrefixUnique, r.PrefixHashes[0], other)
				}
				firsts[r.PrefixHashes[0]] = r.ID
			}
			if sorted && r.ArrivalUS != trace.Null {
				if r.ArrivalUS < lastA {
					return n, badinput.Errorf("%s: row %d (request %s): column %s: expected >= %d (the table promises blis.sorted=arrival), found %d", src.Path, n, r.ID, trace.ColArrivalUS, lastA, r.ArrivalUS)
				}
				lastA = r.ArrivalUS
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			// A bad row, a truncated or corrupt stream: the input is bad (exit 2),
			// as when the same table is re-encoded.
			return n, badinput.Wrap(err)
		}
	}
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// readErr remembers the error of the reader it wraps (io.EOF aside), to
// tell a bad input from a failing temporary file after io.Copy.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}
