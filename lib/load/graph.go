package load

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/trace"
)

// node is one row of the table during a session.
type node struct {
	req     trace.Request
	row     int64 // 1-based position in the table, for messages
	rootArr int64 // arrival of the latest root this row hangs off
	pending int32 // dependencies not finished yet
	readyAt int64 // latest dependency finish (session µs); MinInt64 before any
	// blocked is the first dependency found already ended without
	// completing when this row was read.
	blocked  *node
	children []*node
	phase    phase
	status   string
	reason   string
	finished int64 // client-visible finish (session µs), for dependents
	due      int64 // when it became due (session µs)
	arrival  int64 // written to arrival_us: sent, timer start, or the plan
	root     bool
	retired  bool

	prev, next *node // the live list, in read order
}

type phase uint8

const (
	waiting  phase = iota // on dependencies
	timed                 // in the timer heap (due later, or a tool timer running)
	queued                // due, waiting for a slot
	inFlight              // armed or sent
	done
)

// graph tracks rows by id while anything can still name them. A table
// sorted by arrival promises that every row naming a request comes before
// any root arriving later than that request's root, so a finished node is
// forgotten once a later root has been read: memory follows the sessions
// in flight, not the table.
type graph struct {
	path     string
	ids      map[string]*node
	retire   minHeap[*node]
	frontier int64
	lastRoot int64
	sorted   bool // the table promises blis.sorted=arrival (checked)
	peak     int  // most rows held at once
	head     *node
	tail     *node
}

func newGraph(path string, sorted bool) *graph {
	return &graph{path: path, ids: map[string]*node{}, frontier: math.MinInt64, lastRoot: math.MinInt64, sorted: sorted,
		retire: minHeap[*node]{less: func(a, b *node) bool { return a.rootArr < b.rootArr }}}
}

func (g *graph) rowErr(r *trace.Request, row int64, format string, args ...any) error {
	return &trace.RowError{Path: g.path, Row: row, RequestID: r.ID, SourceRow: r.SourceRow, Err: fmt.Errorf(format, args...)}
}

// maxTimeUS bounds arrival_us, delay_us and timeout_us (2^60 µs, about
// 36,000 years; blis-sim's bound), so sums of them cannot overflow.
const maxTimeUS = 1 << 60

// add registers row r (read in session order) and links it to its
// dependencies. The caller decides what to do with it (see node.pending,
// node.blocked).
func (g *graph) add(r *trace.Request, row int64) (*node, error) {
	for _, v := range []struct {
		col string
		v   int64
	}{{trace.ColArrivalUS, r.ArrivalUS}, {trace.ColDelayUS, r.DelayUS}, {trace.ColTimeoutUS, r.TimeoutUS}} {
		if v.v > maxTimeUS {
			return nil, g.rowErr(r, row, "column %s: expected <= %d (2^60 µs), found %d", v.col, int64(maxTimeUS), v.v)
		}
	}
	if _, dup := g.ids[r.ID]; dup {
		return nil, g.rowErr(r, row, "column %s: duplicate id %q", trace.ColRequestID, r.ID)
	}
	n := &node{req: *r, row: row, readyAt: math.MinInt64, rootArr: r.ArrivalUS, due: trace.Null, arrival: trace.Null, finished: trace.Null}
	if len(r.DependsOn) == 0 {
		n.root = true
		if g.sorted && r.ArrivalUS < g.lastRoot {
			return nil, g.rowErr(r, row, "column %s: the table promises %s=arrival but %d comes after %d", trace.ColArrivalUS, trace.MetaSorted, r.ArrivalUS, g.lastRoot)
		}
		g.lastRoot = max(g.lastRoot, r.ArrivalUS)
		g.advance(r.ArrivalUS)
	} else {
		n.rootArr = math.MinInt64
	}
	for _, id := range r.DependsOn {
		p := g.ids[id]
		if p == nil {
			where := "in the table"
			if g.sorted {
				where = "among earlier rows (in a table sorted by arrival a request must come after its dependencies)"
			}
			return nil, g.rowErr(r, row, "column %s: %q not found %s", trace.ColDependsOn, id, where)
		}
		n.rootArr = max(n.rootArr, p.rootArr)
		if p.phase == done {
			if p.status != trace.StatusCompleted && n.blocked == nil {
				n.blocked = p
			}
			n.readyAt = max(n.readyAt, p.finished)
			continue
		}
		p.children = append(p.children, n)
		n.pending++
	}
	g.ids[r.ID] = n
	g.peak = max(g.peak, len(g.ids))
	g.liveAdd(n)
	return n, nil
}

// advance forgets finished rows that no later row can name.
func (g *graph) advance(rootArrival int64) {
	if rootArrival <= g.frontier {
		return
	}
	g.frontier = rootArrival
	for g.retire.len() > 0 && g.retire.peek().rootArr < g.frontier {
		n := g.retire.pop()
		if g.ids[n.req.ID] == n {
			delete(g.ids, n.req.ID)
		}
	}
}

// finish marks n done; it stays nameable until the frontier passes it.
func (g *graph) finish(n *node) {
	n.phase = done
	g.liveRemove(n)
	if !n.retired {
		n.retired = true
		if n.rootArr < g.frontier {
			delete(g.ids, n.req.ID)
		} else {
			g.retire.push(n)
		}
	}
}

func (g *graph) liveAdd(n *node) {
	n.prev, n.next = g.tail, nil
	if g.tail != nil {
		g.tail.next = n
	} else {
		g.head = n
	}
	g.tail = n
}

func (g *graph) liveRemove(n *node) {
	if n.prev != nil {
		n.prev.next = n.next
	} else if g.head == n {
		g.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else if g.tail == n {
		g.tail = n.prev
	}
	n.prev, n.next = nil, nil
}

// minHeap is a binary heap ordered by less.
type minHeap[T any] struct {
	s    []T
	less func(a, b T) bool
}

func (h *minHeap[T]) len() int { return len(h.s) }
func (h *minHeap[T]) peek() T  { return h.s[0] }

func (h *minHeap[T]) push(x T) {
	h.s = append(h.s, x)
	i := len(h.s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.s[i], h.s[p]) {
			break
		}
		h.s[i], h.s[p] = h.s[p], h.s[i]
		i = p
	}
}

func (h *minHeap[T]) pop() T {
	top := h.s[0]
	n := len(h.s) - 1
	h.s[0] = h.s[n]
	var zero T
	h.s[n] = zero
	h.s = h.s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(h.s[l], h.s[m]) {
			m = l
		}
		if r < n && h.less(h.s[r], h.s[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.s[i], h.s[m] = h.s[m], h.s[i]
		i = m
	}
	return top
}
