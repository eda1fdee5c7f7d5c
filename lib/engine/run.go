// Package engine runs BLIS's discrete-event cluster simulator over a
// requests table. The simulator itself is in the rooms below it:
//
//	config   the cluster YAML: deployments, pools, router
//	cluster  the core: event loop, router pipeline, dependency graph
//	replica  one replica: lifecycle, step timing
//	sched    batch formation (vLLM v1's scheduler)
//	kv       the paged KV cache with prefix caching
//	policy   admission, priority and routing policies and their views
//	request  a request's state in flight
//
// This package is the thin layer that feeds a requests table into a
// cluster.Cluster (streaming a sorted table, or reading and ordering an
// unsorted one) and resolves each deployment's latency model.
package engine

import (
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/latency"
)

// Source yields request rows in batches; io.EOF at the end.
// *trace.RequestReader satisfies it.
type Source interface {
	Next(buf []row.Request) ([]row.Request, error)
}

type (
	// Sink receives results; *trace.ResultWriter satisfies it.
	Sink = cluster.Sink
	// StepSink receives step rows; *trace.StepWriter satisfies it.
	StepSink = cluster.StepSink
	// Options are the run's side channels (see cluster.Options).
	Options = cluster.Options
	// Summary counts what happened.
	Summary = cluster.Summary
)

type sliceSource struct {
	reqs []row.Request
	done bool
}

func (s *sliceSource) Len() int { return len(s.reqs) }

func (s *sliceSource) Row(i int, r *row.Request) error {
	*r = s.reqs[i]
	return nil
}

func (s *sliceSource) Next(buf []row.Request) ([]row.Request, error) {
	if s.done {
		return buf[:0], io.EOF
	}
	s.done = true
	return s.reqs, nil
}

// SliceSource serves requests held in memory, in any order: Run sorts them,
// checks the dependency graph as a whole (duplicates, dangling depends_on,
// cycles) and registers them all before simulating. It does not modify
// the slice.
func SliceSource(reqs []row.Request) Source { return &sliceSource{reqs: reqs} }

// Table is a requests table held in memory, in any order (a
// *trace.RequestTable: Arrow batches decoded row by row).
type Table interface {
	Len() int
	// Row fills r with row i (0-based); a bad value is a *row.RowError.
	Row(i int, r *row.Request) error
}

type tableSource struct{ Table }

func (tableSource) Next(buf []row.Request) ([]row.Request, error) { return buf[:0], io.EOF }

// TableSource serves a table held in memory, in any order, as SliceSource
// does; rows are decoded as they are fed, so the run holds the table's own
// buffers and not a Request per row.
func TableSource(t Table) Source { return tableSource{t} }

// MaxTimeUS bounds arrival_us and delay_us (about 36,000 years), so that
// adding delays, alpha and step times to them cannot overflow int64.
const MaxTimeUS = 1 << 60

// Validated is implemented by a Source or Table whose rows have passed
// row.Request.Validate when they were decoded (trace's readers check every
// row): the feeder then checks the engine's own bounds only.
type Validated interface{ RowsValidated() bool }

func rowsValidated(x any) bool {
	v, ok := x.(Validated)
	return ok && v.RowsValidated()
}

// validateRow is trace's row check (unless the rows come checked) plus the
// engine's time bounds.
func validateRow(r *row.Request, checked bool) error {
	if !checked {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	for _, v := range []struct {
		col string
		v   int64
	}{{row.ColArrivalUS, r.ArrivalUS}, {row.ColDelayUS, r.DelayUS}, {row.ColTimeoutUS, r.TimeoutUS}} {
		if v.v > MaxTimeUS {
			return fmt.Errorf("column %s: expected <= %d (2^60 µs), found %d", v.col, int64(MaxTimeUS), v.v)
		}
	}
	return nil
}

// Run simulates cfg's cluster on the requests of src, writing results to
// sink. models holds each deployment's latency model (see Prepare), in
// config.Cluster.Resolved order. Errors in the input are *row.RowError.
func Run(cfg config.Cluster, models []latency.Model, src Source, sink Sink, opts Options) (Summary, error) {
	tab, preload := src.(Table)
	opts.Streamed = !preload
	c, err := cluster.New(&cfg, models, sink, opts)
	if err != nil {
		return Summary{}, err
	}
	f := feeder{c: c, src: src, path: opts.Path, lastRoot: math.MinInt64, checked: rowsValidated(src)}
	if preload {
		f.checked = rowsValidated(tab)
	}
	if preload {
		err = f.preloadAll(tab)
	} else {
		err = f.readNextRoot()
	}
	if err != nil {
		return c.Summary(), err
	}
	for {
		st := c.RunUntil(math.MaxInt64)
		if err := c.Err(); err != nil {
			return c.Summary(), err
		}
		if st != cluster.NeedInput {
			break
		}
		if err := f.readNextRoot(); err != nil {
			return c.Summary(), err
		}
	}
	// Rows not read yet belong to sessions rooted after the horizon (the
	// next root, already read, arrives after it): each is written as
	// unfinished at once, in constant memory, and still checked.
	if err := f.drain(); err != nil {
		return c.Summary(), err
	}
	return c.Finish()
}

// feeder reads the input into the cluster.
type feeder struct {
	c        *cluster.Cluster
	src      Source
	path     string
	buf      []row.Request
	pos      int
	rows     int64
	eof      bool
	lastRoot int64
	checked  bool // rows come validated (see Validated)
	// An in-memory table is fed in order (row indices into tab).
	order []int32
	tab   Table
	next0 int
	cur   row.Request
}

func (f *feeder) rowErr(r *row.Request, n int64, err error) error {
	return &row.RowError{Path: f.path, Row: n, RequestID: r.ID, SourceRow: r.SourceRow, Err: err}
}

// next returns the next row, or nil at the end of the input.
func (f *feeder) next() (*row.Request, error) {
	if f.tab != nil {
		if f.next0 == len(f.order) {
			if !f.eof {
				f.eof = true
				f.c.InputDone()
			}
			return nil, nil
		}
		i := f.order[f.next0]
		f.next0++
		f.rows = int64(i) + 1 // errors name the row as it is in the table
		if err := f.tab.Row(int(i), &f.cur); err != nil {
			return nil, err
		}
		return &f.cur, nil
	}
	for f.pos >= len(f.buf) {
		if f.eof {
			return nil, nil
		}
		var err error
		f.buf, err = f.src.Next(f.buf)
		f.pos = 0
		if err == io.EOF {
			f.eof = true
			f.c.InputDone()
		} else if err != nil {
			return nil, err
		}
	}
	r := &f.buf[f.pos]
	f.pos++
	f.rows++
	if err := validateRow(r, f.checked); err != nil {
		return nil, f.rowErr(r, f.rows, err)
	}
	if len(r.DependsOn) == 0 {
		if r.ArrivalUS < f.lastRoot {
			return nil, f.rowErr(r, f.rows, fmt.Errorf("column %s: the table promises %s=arrival but %d comes after %d", row.ColArrivalUS, row.MetaSorted, r.ArrivalUS, f.lastRoot))
		}
		f.lastRoot = r.ArrivalUS
	}
	return r, nil
}

// readNextRoot reads rows until the next simulated root request (whose
// arrival the cluster schedules) or the end of the input. Dependents read
// on the way are registered, so every request of a session is known
// before the clock passes the next root's arrival.
func (f *feeder) readNextRoot() error {
	for {
		r, err := f.next()
		if r == nil || err != nil {
			return err
		}
		root := len(r.DependsOn) == 0
		if root {
			f.c.Advance(r.ArrivalUS)
		}
		if err := f.c.Inject(r, f.rows); err != nil {
			return err
		}
		if root && r.SourceStatus != row.SourceFailed {
			if f.pos < len(f.buf) {
				f.c.WarmID(f.buf[f.pos].ID)
			}
			return nil
		}
	}
}

// drain writes every row left unread as unfinished (after the horizon).
func (f *feeder) drain() error {
	for {
		r, err := f.next()
		if r == nil || err != nil {
			return err
		}
		f.c.WriteUnread(r)
		if err := f.c.Err(); err != nil {
			return err
		}
	}
}

// preloadAll runs an in-memory table: graph checks on the whole table
// (duplicates, dangling depends_on, cycles), then its rows in the order a
// sorted table would have them — roots by arrival, each dependent right
// after the latest root it hangs off — fed as a stream, so that memory
// follows the requests in flight here too (streamed and in-memory runs are
// the same simulation; a test checks it byte for byte).
//
// Only the order is kept: rows are decoded again as they are fed, so the
// run holds no Request per row (whose pointers every GC cycle would scan).
func (f *feeder) preloadAll(t Table) error {
	n := t.Len()
	idx := make(map[string]int32, n)
	arrival := make([]int64, n)
	var deps [][]string // only rows with dependencies are non-nil
	var r row.Request
	for i := 0; i < n; i++ {
		if err := t.Row(i, &r); err != nil {
			return err
		}
		if err := validateRow(&r, f.checked); err != nil {
			return f.rowErr(&r, int64(i+1), err)
		}
		if j, dup := idx[r.ID]; dup {
			return f.rowErr(&r, int64(i+1), fmt.Errorf("column %s: duplicate id %q (first at row %d)", row.ColRequestID, r.ID, j+1))
		}
		idx[r.ID] = int32(i)
		arrival[i] = r.ArrivalUS
		if len(r.DependsOn) > 0 {
			if deps == nil {
				deps = make([][]string, n)
			}
			deps[i] = r.DependsOn
		}
	}
	// Kahn's algorithm in row order: roots by arrival, then dependents.
	indeg := make([]int32, n)
	var kids [][]int32
	if deps != nil {
		kids = make([][]int32, n)
	}
	for i := range deps {
		for _, d := range deps[i] {
			j, ok := idx[d]
			if !ok {
				if err := t.Row(i, &r); err != nil {
					return err
				}
				return f.rowErr(&r, int64(i+1), fmt.Errorf("column %s: %q not found in the table", row.ColDependsOn, d))
			}
			indeg[i]++
			kids[j] = append(kids[j], int32(i))
		}
	}
	order := make([]int32, 0, n)
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			order = append(order, int32(i))
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		return arrival[order[a]] < arrival[order[b]]
	})
	for k := 0; k < len(order) && kids != nil; k++ {
		for _, c := range kids[order[k]] {
			indeg[c]--
			if indeg[c] == 0 {
				order = append(order, c)
			}
		}
	}
	if len(order) < n {
		for i := 0; i < n; i++ {
			if indeg[i] > 0 {
				if err := t.Row(i, &r); err != nil {
					return err
				}
				return f.rowErr(&r, int64(i+1), fmt.Errorf("column %s: dependency cycle through this request", row.ColDependsOn))
			}
		}
	}
	// The root arrival each row hangs off (the latest among its ancestors'
	// roots); in topological order every parent's is known first.
	rootArr := arrival
	if deps != nil {
		rootArr = make([]int64, n)
		for _, i := range order {
			if len(deps[i]) == 0 {
				rootArr[i] = arrival[i]
				continue
			}
			rootArr[i] = math.MinInt64
			for _, d := range deps[i] {
				rootArr[i] = max(rootArr[i], rootArr[idx[d]])
			}
		}
	}
	pos := make([]int32, n) // topological position
	for k, i := range order {
		pos[i] = int32(k)
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := order[a], order[b]
		return rootArr[x] < rootArr[y] || rootArr[x] == rootArr[y] && pos[x] < pos[y]
	})
	f.order, f.tab = order, t
	return f.readNextRoot()
}
