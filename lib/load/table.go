package load

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"

	"github.com/blis-sim/blis/lib/cleanup"
	"github.com/blis-sim/blis/lib/trace"
)

// Table is a requests table opened for a session. A table sorted by
// arrival (blis.sorted=arrival, as blis-convert and blis-synth write) is
// read twice, streaming: a check pass before anything is sent, then the
// session; another table is read into memory once and ordered the way
// blis-sim orders it (roots by arrival, each dependent after the latest
// root it hangs off). A results table is accepted too: its request
// columns are the requests (a recorded run issued again).
type Table struct {
	Path string // as the user named it ("-" is <stdin>)
	Meta trace.Meta
	// PrefixBlockSize is the table's blis.prefix_block_size (0 if absent).
	PrefixBlockSize int

	file   string // what each pass opens
	spool  string // a temporary copy of stdin, removed by Close
	forget func() // unregisters spool from lib/cleanup
	sorted bool
	rows   []trace.Request // an unsorted table, in memory
	order  []int32
}

// OpenTable opens path ("-" for stdin, spooled to a temporary file so it
// can be read twice).
func OpenTable(path string, stdin io.Reader) (*Table, error) {
	t := &Table{Path: path, file: path}
	if path == "" || path == "-" {
		t.Path = "<stdin>"
		// trace.Open refuses a terminal on stdin; check before spooling.
		if f, ok := stdin.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				return nil, &trace.InputError{Err: fmt.Errorf("no input: give a requests table, or pipe one into blis-load")}
			}
		}
		tmp, err := os.CreateTemp("", "blis-load-stdin-*")
		if err != nil {
			return nil, err
		}
		t.forget = cleanup.Add(tmp.Name())
		_, err = io.Copy(tmp, stdin)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		t.spool, t.file = tmp.Name(), tmp.Name()
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		// The format goes by extension: name an IPC or Parquet file so.
		if ext := magicExt(t.spool); ext != "" {
			if err := os.Rename(t.spool, t.spool+ext); err != nil {
				t.Close()
				return nil, err
			}
			t.forget()
			t.spool += ext
			t.forget = cleanup.Add(t.spool)
			t.file = t.spool
		}
	}
	src, err := t.open()
	if err != nil {
		t.Close()
		return nil, err
	}
	t.Meta = src.src.Meta()
	t.sorted = t.Meta.Get(trace.MetaSorted) == "arrival"
	if v := t.Meta.Get(trace.MetaPrefixBlockSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			src.close()
			t.Close()
			return nil, &trace.InputError{Err: fmt.Errorf("%s: schema metadata %s: expected a positive integer, found %q", t.Path, trace.MetaPrefixBlockSize, v)}
		}
		t.PrefixBlockSize = n
	}
	if t.sorted {
		src.close()
		return t, nil
	}
	defer src.close()
	for {
		var batch []trace.Request
		batch, err = src.rr.Next(nil)
		t.rows = append(t.rows, batch...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Close()
			return nil, t.named(err)
		}
	}
	if t.order, err = arrivalOrder(t.Path, t.rows); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Sorted reports whether the table is streamed (blis.sorted=arrival).
func (t *Table) Sorted() bool { return t.sorted }

// Close removes the spooled copy of stdin.
func (t *Table) Close() {
	if t.spool != "" {
		os.Remove(t.spool)
		t.spool = ""
		t.forget()
	}
}

// named makes trace's errors name the user's path, not the spool file.
func (t *Table) named(err error) error {
	if re, ok := err.(*trace.RowError); ok && t.spool != "" {
		re.Path = t.Path
	}
	return err
}

func magicExt(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var b [6]byte
	n, _ := io.ReadFull(f, b[:])
	switch {
	case n == 6 && string(b[:]) == "ARROW1":
		return ".arrow"
	case n >= 4 && string(b[:4]) == "PAR1":
		return ".parquet"
	}
	return ""
}

type streamSource struct {
	src *trace.Source
	rr  *trace.RequestReader
}

func (s *streamSource) close() { s.src.Close() }

func (t *Table) open() (*streamSource, error) {
	src, err := trace.Open(t.file, nil)
	if err != nil {
		if t.spool != "" {
			return nil, &trace.InputError{Err: fmt.Errorf("%s: %v", t.Path, stripPath(err.Error(), t.spool))}
		}
		return nil, err
	}
	if t.spool != "" {
		src.Path = t.Path
	}
	rr, err := trace.NewRequestReader(src)
	if err != nil {
		src.Close()
		return nil, err
	}
	return &streamSource{src: src, rr: rr}, nil
}

func stripPath(msg, path string) string {
	if len(msg) > len(path)+2 && msg[:len(path)] == path {
		return msg[len(path)+2:]
	}
	return msg
}

// rowSource yields the table's rows in session order.
type rowSource interface {
	// next returns the next row and its 1-based position in the table, or
	// nil at the end.
	next() (*trace.Request, int64, error)
	close()
	// prime starts reading ahead (before a session's clock starts).
	prime()
}

// rows opens a pass over the table in session order.
func (t *Table) rowsFrom() (rowSource, error) {
	if !t.sorted {
		return &sliceRows{t: t}, nil
	}
	s, err := t.open()
	if err != nil {
		return nil, err
	}
	return &streamRows{s: s, t: t}, nil
}

// streamRows decodes batches on a goroutine of its own, one batch ahead,
// so a session's loop never waits on Arrow decoding while requests are
// due.
type streamRows struct {
	s     *streamSource
	t     *Table
	ch    chan rowBatch
	quit  chan struct{}
	done  chan struct{}
	buf   []trace.Request
	pos   int
	row   int64
	eof   bool
	err   error
	start sync.Once
}

type rowBatch struct {
	rows []trace.Request
	err  error // io.EOF at the end
}

func (r *streamRows) read() {
	defer close(r.done)
	for {
		// A fresh batch each time: nodes copy rows, but a batch handed
		// out must not change under the caller.
		b, err := r.s.rr.Next(nil)
		select {
		case r.ch <- rowBatch{b, err}:
		case <-r.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// prime starts the reader and waits for the first batch.
func (r *streamRows) prime() {
	r.start.Do(func() {
		r.ch, r.quit, r.done = make(chan rowBatch, 1), make(chan struct{}), make(chan struct{})
		go r.read()
		r.take()
	})
}

func (r *streamRows) take() {
	b := <-r.ch
	r.buf, r.pos = b.rows, 0
	if b.err != nil {
		r.eof = true
		if b.err != io.EOF {
			r.err = r.t.named(b.err)
		}
	}
}

func (r *streamRows) next() (*trace.Request, int64, error) {
	r.prime()
	for r.pos >= len(r.buf) {
		if r.eof {
			return nil, 0, r.err
		}
		r.take()
	}
	r.pos++
	r.row++
	return &r.buf[r.pos-1], r.row, nil
}

func (r *streamRows) close() {
	if r.quit != nil {
		close(r.quit)
		<-r.done
	}
	r.s.close()
}

type sliceRows struct {
	t *Table
	k int
}

func (r *sliceRows) next() (*trace.Request, int64, error) {
	if r.k >= len(r.t.order) {
		return nil, 0, nil
	}
	i := r.t.order[r.k]
	r.k++
	return &r.t.rows[i], int64(i) + 1, nil
}

func (r *sliceRows) close() {}
func (r *sliceRows) prime() {}

// arrivalOrder checks an in-memory table's graph as a whole (duplicate
// ids, dangling depends_on, cycles) and returns its rows in the order a
// sorted table would have them: blis-sim's order.
func arrivalOrder(path string, reqs []trace.Request) ([]int32, error) {
	rowErr := func(i int, format string, args ...any) error {
		return &trace.RowError{Path: path, Row: int64(i + 1), RequestID: reqs[i].ID, SourceRow: reqs[i].SourceRow, Err: fmt.Errorf(format, args...)}
	}
	idx := make(map[string]int32, len(reqs))
	for i := range reqs {
		if j, dup := idx[reqs[i].ID]; dup {
			return nil, rowErr(i, "column %s: duplicate id %q (first at row %d)", trace.ColRequestID, reqs[i].ID, j+1)
		}
		idx[reqs[i].ID] = int32(i)
	}
	indeg := make([]int32, len(reqs))
	kids := make([][]int32, len(reqs))
	for i := range reqs {
		for _, d := range reqs[i].DependsOn {
			j, ok := idx[d]
			if !ok {
				return nil, rowErr(i, "column %s: %q not found in the table", trace.ColDependsOn, d)
			}
			indeg[i]++
			kids[j] = append(kids[j], int32(i))
		}
	}
	order := make([]int32, 0, len(reqs))
	for i := range reqs {
		if indeg[i] == 0 {
			order = append(order, int32(i))
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return reqs[order[a]].ArrivalUS < reqs[order[b]].ArrivalUS })
	for k := 0; k < len(order); k++ {
		for _, c := range kids[order[k]] {
			if indeg[c]--; indeg[c] == 0 {
				order = append(order, c)
			}
		}
	}
	if len(order) < len(reqs) {
		for i := range reqs {
			if indeg[i] > 0 {
				return nil, rowErr(i, "column %s: dependency cycle through this request", trace.ColDependsOn)
			}
		}
	}
	rootArr := make([]int64, len(reqs))
	for _, i := range order {
		if len(reqs[i].DependsOn) == 0 {
			rootArr[i] = reqs[i].ArrivalUS
			continue
		}
		rootArr[i] = -1 << 63
		for _, d := range reqs[i].DependsOn {
			rootArr[i] = max(rootArr[i], rootArr[idx[d]])
		}
	}
	pos := make([]int32, len(reqs))
	for k, i := range order {
		pos[i] = int32(k)
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := order[a], order[b]
		return rootArr[x] < rootArr[y] || rootArr[x] == rootArr[y] && pos[x] < pos[y]
	})
	return order, nil
}

// Stats describes a table's rows as a session would use them.
type Stats struct {
	Rows         int64 // rows in the session (after --limit)
	LLM          int64 // llm rows that will be sent (not source_failed)
	Tool         int64
	SourceFailed int64
	Roots        int64
	// Models lists the distinct values of the model column, sorted (at
	// most 64).
	Models []string
	// Shapes holds the (input, output) tokens of the first llm rows, for
	// warm-up requests shaped like the session's.
	Shapes [][2]int32
	// LastArrival is the latest root arrival_us.
	LastArrival int64
}

// Check reads the rows a session would use (the first limit rows in
// session order; all when limit <= 0) and checks what the session needs
// before anything is sent: every row valid, ids unique, dependencies
// present, the sorted promise kept. shapes is how many llm rows' token
// counts to keep for warm-up.
func (t *Table) Check(limit int64, shapes int) (Stats, error) {
	src, err := t.rowsFrom()
	if err != nil {
		return Stats{}, err
	}
	defer src.close()
	g := newGraph(t.Path, true)
	st := Stats{LastArrival: -1}
	models := map[string]bool{}
	for limit <= 0 || st.Rows < limit {
		r, row, err := src.next()
		if err != nil {
			return st, err
		}
		if r == nil {
			break
		}
		n, err := g.add(r, row)
		if err != nil {
			return st, err
		}
		n.status = trace.StatusCompleted
		g.finish(n)
		st.Rows++
		if n.root {
			st.Roots++
			st.LastArrival = max(st.LastArrival, r.ArrivalUS)
		}
		switch {
		case r.SourceStatus == trace.SourceFailed:
			st.SourceFailed++
		case r.Kind == trace.KindTool:
			st.Tool++
		default:
			st.LLM++
			if len(st.Shapes) < shapes {
				st.Shapes = append(st.Shapes, [2]int32{r.InputTokens, r.OutputTokens})
			}
		}
		if r.Model != "" && len(models) < 64 {
			models[r.Model] = true
		}
	}
	for m := range models {
		st.Models = append(st.Models, m)
	}
	sort.Strings(st.Models)
	return st, nil
}
