// Package convert turns production LLM request traces (Azure, BurstGPT,
// Mooncake, Qwen-Bailian, Claude Code agent traces, vLLM benchmark results,
// LLMServingSim vLLM runs, Vidur, Splitwise, generic CSV/JSONL) into the BLIS
// requests table. docs/convert.md documents every format and flag.
package convert

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/rng"

	"github.com/blis-sim/blis/lib/trace"
)

// Options configures a conversion.
type Options struct {
	Format      string   // "" = detect from content
	Inputs      []string // paths, "-" for stdin
	BlockSize   int      // tokens per prefix hash block; 0 = the format's default
	Start, End  string   // window: durations from the first request ("10m") or RFC 3339
	Limit       int64    // stop after this many rows (0 = all); a session in progress is completed
	Speedup     float64  // divide arrival times and delays by this (0 or 1 = unchanged)
	Sample      float64  // keep each root request (with its session) with this probability (0 = keep all)
	Seed        uint64   // seed of the --sample stream
	FilterModel string   // keep only sessions whose root request uses this model
	SkipBad     bool     // skip malformed rows (counted) instead of stopping
	Sort        bool     // buffer the whole input and sort it, for badly unsorted traces
	Generic     Generic  // column mapping for the generic csv/jsonl formats
	Sessions    string   // qwen: "open" (children keep their arrival) or "closed" (children depend on their parent)
	SessionGap  int64    // weka: µs between the starts of successive conversation files
	Args        []string // command line, for provenance
	Tool        string   // tool name for provenance and messages
}

// Generic maps columns of an arbitrary CSV or JSONL file.
type Generic struct {
	TimeCol, InputCol, OutputCol string
	TimeUnit                     string // s, ms, us, ns or iso
	IDCol, ModelCol, TenantCol   string
	SessionCol                   string
	LoRACol                      string // the LoRA adapter (requests' lora)
}

// Row is one converted request before rebasing. T is its time on the
// source's clock in µs: its arrival for a root, its session root's arrival
// for a dependent (so sorting by T keeps sessions together).
type Row struct {
	trace.Request
	T int64
}

// parser yields requests in source order.
type parser interface {
	// next fills r; io.EOF at the end; a *BadRowError for a malformed row
	// (the parser is then positioned after it).
	next(r *Row) error
	// meta adds format metadata (block size, whether T is Unix time).
	meta() formatMeta
	// path names the input in messages.
	path() string
}

type formatMeta struct {
	name      string
	blockSize int  // tokens per prefix hash; 0 = no prefix hashes
	epoch     bool // T is µs since the Unix epoch
	buffer    bool // dependents arrive far from their roots: sort the whole input
	ownIDs    bool // request ids come from the source, so they must be checked for duplicates
}

// window is the reorder window: rows are held this long before emission so
// that a stream is only buffered wholesale when it is really out of order.
const window = 16 * 1024

// pipeline applies the replay options in arrival order and writes rows.
type pipeline struct {
	opts   *Options
	fm     formatMeta
	path   string // input named in errors found while emitting
	stats  *Stats
	open   func(md trace.Meta) (rowSink, error)
	md     trace.Meta
	sink   rowSink
	rng    *rand.Rand
	t0     int64 // T of the first row: --start/--end count from it
	tOut   int64 // T of the first kept row: output times count from it
	began  bool
	start  int64 // window in source µs relative to t0; math.MinInt64/MaxInt64 when open
	end    int64
	startS string
	endS   string

	ring      []Row // streaming reorder window (a ring of up to window rows)
	rhead     int
	rlen      int
	pend      []Row // everything, once buffering (sorted at the end)
	bufferAll bool
	lastT     int64 // T of the last pushed row (sortedness check)
	emittedT  int64 // T of the last emitted row
	emitted   bool

	keepSession bool
	done        bool
}

// rowSink receives converted rows (a trace.RequestWriter, or a counter).
type rowSink interface {
	Write(r *trace.Request) error
	Close() error
}

var errStop = errors.New("stop")

func (p *pipeline) push(r *Row) error {
	if p.done {
		return errStop
	}
	n := p.rlen + len(p.pend)
	if n > 0 && r.T < p.lastT && !p.bufferAll {
		p.startBuffering()
		if r.ArrivalUS != trace.Null {
			p.stats.Reordered = true
		} else {
			p.stats.Regrouped = true
		}
	}
	if p.emitted && r.T < p.emittedT {
		return fmt.Errorf("%s: request %s arrives %s before requests already written: the trace is out of arrival order by more than the %d-row reorder window; rerun with --sort (buffers the whole trace in memory)",
			p.fm.name, r.ID, time.Duration(p.emittedT-r.T)*time.Microsecond, window)
	}
	p.lastT = r.T
	if p.bufferAll {
		p.pend = append(p.pend, *r)
		return nil
	}
	// Streaming: a ring of the last rows, the oldest written when it is full.
	if p.ring == nil {
		p.ring = make([]Row, window)
	}
	if p.rlen < window {
		p.ring[(p.rhead+p.rlen)%window] = *r
		p.rlen++
		return nil
	}
	slot := &p.ring[p.rhead]
	if err := p.emit(slot); err != nil {
		return err
	}
	*slot = *r
	p.rhead = (p.rhead + 1) % window
	return nil
}

// startBuffering moves the ring into the buffer that is sorted at the end.
func (p *pipeline) startBuffering() {
	p.bufferAll = true
	for i := 0; i < p.rlen; i++ {
		p.pend = append(p.pend, p.ring[(p.rhead+i)%window])
	}
	p.ring, p.rlen, p.rhead = nil, 0, 0
}

// finish emits what is pending (sorted when the input was not) and closes the sink.
func (p *pipeline) finish() error {
	if !p.bufferAll {
		p.startBuffering() // in order already: the stable sort below is a no-op pass
	}
	rest := p.pend
	slices.SortStableFunc(rest, func(a, b Row) int {
		switch {
		case a.T < b.T:
			return -1
		case a.T > b.T:
			return 1
		}
		return 0
	})
	for i := range rest {
		if p.done {
			p.stats.Filtered += int64(len(rest) - i)
			break
		}
		if err := p.emit(&rest[i]); err != nil {
			if err == errStop {
				p.stats.Filtered += int64(len(rest) - i)
				break
			}
			return err
		}
	}
	p.pend = nil
	if p.sink == nil {
		if err := p.openSink(); err != nil {
			return err
		}
	}
	return p.sink.Close()
}

func (p *pipeline) openSink() error {
	md := p.md
	if p.sink == nil && p.began && p.fm.epoch && p.stats.Written == 0 && p.keepSession {
		md.Set(trace.MetaStartTime, time.UnixMicro(p.tOut).UTC().Format(time.RFC3339Nano))
	}
	s, err := p.open(md)
	if err != nil {
		return err
	}
	p.sink = s
	return nil
}

// parseBound turns a --start/--end value into source µs relative to t0.
func (p *pipeline) parseBound(flag, v string, def int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, usageErr("--%s: expected a duration from the first request >= 0, found %q", flag, v)
		}
		return d.Microseconds(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, usageErr("--%s: expected a duration from the first request (e.g. 10m, 1h30m) or an RFC 3339 time, found %q", flag, v)
	}
	if !p.fm.epoch {
		return 0, usageErr("--%s %s: this %s trace has relative times only, so an absolute time cannot be placed; give a duration from the first request instead", flag, v, p.fm.name)
	}
	return t.UnixMicro() - p.t0, nil
}

func (p *pipeline) scale(v int64, r *Row, col string) (int64, error) {
	if p.opts.Speedup == 0 || p.opts.Speedup == 1 {
		return v, nil
	}
	f := math.Round(float64(v) / p.opts.Speedup)
	// float64 → int64 of an out-of-range value is undefined in Go (MinInt64 on amd64).
	if !(f >= 0 && f < math.MaxInt64) {
		return 0, usageErr("--speedup %g: request %s (source row %d): %s %d µs / %g does not fit in int64 µs",
			p.opts.Speedup, r.ID, r.SourceRow, col, v, p.opts.Speedup)
	}
	return int64(f), nil
}

func (p *pipeline) emit(r *Row) error {
	if !p.began {
		p.began = true
		p.t0 = r.T
		var err error
		if p.start, err = p.parseBound("start", p.startS, math.MinInt64); err != nil {
			return err
		}
		if p.end, err = p.parseBound("end", p.endS, math.MaxInt64); err != nil {
			return err
		}
		if p.start >= p.end {
			return usageErr("--start %s --end %s: the window is empty (start must come before end)", p.startS, p.endS)
		}
	}
	rel := r.T - p.t0
	if r.T >= p.t0 && rel < 0 { // the subtraction wrapped: times ±292,000 years apart
		return &BadRowError{Path: p.path, Line: r.SourceRow, Column: trace.ColArrivalUS,
			Expected: "a time less than 2^63 µs after the first request",
			Found:    strconv.FormatUint(uint64(r.T)-uint64(p.t0), 10) + " µs after it"}
	}
	root := r.ArrivalUS != trace.Null
	if root {
		if rel >= p.end || (p.opts.Limit > 0 && p.stats.Written >= p.opts.Limit) {
			p.done = true
			p.stats.Filtered++
			return errStop
		}
		p.keepSession = rel >= p.start &&
			(p.opts.FilterModel == "" || r.Model == p.opts.FilterModel) &&
			(p.rng == nil || p.rng.Float64() < p.opts.Sample)
	}
	if !p.keepSession {
		p.stats.Filtered++
		return nil
	}
	if p.sink == nil {
		// The first kept row is a root: times count from it.
		p.tOut = r.T
		if err := p.openSink(); err != nil {
			return err
		}
	}
	var err error
	if root {
		if r.ArrivalUS, err = p.scale(r.T-p.tOut, r, trace.ColArrivalUS); err != nil {
			return err
		}
	}
	if r.DelayUS, err = p.scale(r.DelayUS, r, trace.ColDelayUS); err != nil {
		return err
	}
	p.emittedT, p.emitted = r.T, true
	p.stats.Written++
	return p.sink.Write(&r.Request)
}

// usageErr is a bad flag combination or value (exit status 2).
func usageErr(format string, args ...any) error { return badinput.Errorf(format, args...) }

// run drives parsers through the pipeline. open creates the output once the
// metadata (start time) is known.
func run(opts *Options, ps []parser, inputs []trace.Input, open func(trace.Meta) (rowSink, error)) (*Stats, error) {
	st := &Stats{}
	if len(ps) == 0 {
		return st, errors.New("no input")
	}
	fm := ps[0].meta()
	if opts.BlockSize > 0 && fm.blockSize > 0 {
		fm.blockSize = opts.BlockSize
	}
	md := trace.NewMeta()
	md.Set(trace.MetaSourceFormat, fm.name)
	md.Set(trace.MetaSorted, "arrival")
	if fm.blockSize > 0 {
		md.Set(trace.MetaPrefixBlockSize, strconv.Itoa(fm.blockSize))
	}
	if opts.Speedup != 0 && opts.Speedup != 1 {
		md.Set(trace.MetaTimeScale, strconv.FormatFloat(opts.Speedup, 'g', -1, 64))
	}
	stage := trace.Stage{Tool: opts.Tool, Version: trace.Version, Args: opts.Args, Inputs: inputs}
	p := &pipeline{opts: opts, fm: fm, path: ps[0].path(), stats: st, open: open, startS: opts.Start, endS: opts.End, bufferAll: opts.Sort || fm.buffer}
	if opts.Sample > 0 && opts.Sample < 1 {
		seed := opts.Seed
		stage.Seed = &seed
		p.rng = rng.New(seed, "sample")
	}
	p.md = md.With(stage)
	var (
		r    Row
		seen map[string]int64
	)
	if fm.ownIDs {
		seen = map[string]int64{}
	}
	for _, ps := range ps {
		for {
			err := ps.next(&r) // parsers overwrite every field of r
			if err == io.EOF {
				break
			}
			if err != nil {
				var be *BadRowError
				if errors.As(err, &be) && opts.SkipBad {
					st.skip(be)
					continue
				}
				p.closeOnError()
				return st, err
			}
			if err := r.Validate(); err != nil {
				be := validationError(ps.path(), r.SourceRow, err)
				if opts.SkipBad {
					st.skip(be)
					continue
				}
				p.closeOnError()
				return st, be
			}
			if fm.ownIDs {
				if first, dup := seen[r.ID]; dup {
					be := &BadRowError{Path: ps.path(), Line: r.SourceRow, Column: trace.ColRequestID,
						Expected: "a unique id", Found: fmt.Sprintf("%q again (first at row %d)", r.ID, first)}
					if opts.SkipBad {
						st.skip(be)
						continue
					}
					p.closeOnError()
					return st, be
				}
				seen[r.ID] = r.SourceRow
			}
			st.Read++
			if err := p.push(&r); err != nil {
				if err == errStop {
					break
				}
				p.closeOnError()
				return st, err
			}
		}
		if p.done {
			break
		}
	}
	return st, p.finish()
}

// closeOnError abandons the output: a file output is removed (an earlier
// file at the path stays as it was) and a stream is left without its
// end-of-stream marker, so the reader reports a truncated table instead of
// accepting a short one (trace.Abort).
func (p *pipeline) closeOnError() {
	if a, ok := p.sink.(interface{ Abort() }); ok {
		a.Abort()
	}
}

// validationError restates a trace.Request.Validate error ("column c:
// expected x, found y") with the source file and line.
func validationError(path string, line int64, err error) *BadRowError {
	msg := err.Error()
	col, rest, _ := strings.Cut(strings.TrimPrefix(msg, "column "), ": expected ")
	exp, found, ok := strings.Cut(rest, ", found ")
	if !ok {
		return &BadRowError{Path: path, Line: line, Column: "row", Expected: "a valid request", Found: msg}
	}
	return &BadRowError{Path: path, Line: line, Column: col, Expected: exp, Found: found}
}

// requestID returns "<name>:<line>".
func requestID(name string, line int64) string {
	var d [20]byte
	digits := strconv.AppendInt(d[:0], line, 10)
	var b strings.Builder
	b.Grow(len(name) + 1 + len(digits))
	b.WriteString(name)
	b.WriteByte(':')
	b.Write(digits)
	return b.String()
}

// baseName is the file name without directories and the usual trace
// extensions, used to build request ids.
func baseName(path string) string {
	if path == "-" || path == "" {
		return "stdin"
	}
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		path = path[i+1:]
	}
	return path
}
