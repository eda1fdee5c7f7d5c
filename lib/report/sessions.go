package report

import (
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/blis-sim/blis/lib/trace"
)

// sessNode is one request of an agentic session, kept until the end of the
// table because a session's critical path needs all its requests.
type sessNode struct {
	sess      int32
	id        string
	deps      []string
	root      bool  // had its own arrival_us
	arr       int64 // arrival, or when it became ready (trace.Null if unknown)
	fin       int64 // trace.Null unless completed
	e2e       int64
	delay     int64
	loop      int64
	tool      bool
	completed bool
	cut       bool   // unfinished at the horizon
	late      bool   // arrives after the horizon: never reached
	step      string // step_id: instances sharing a step and iteration are a fan-out
}

type sessions struct {
	key   *strKey
	nodes []sessNode
	limit int
	times []sessTimes // per node, when charts are drawn (Options.Charts)
}

// sessTimes is what a session's timeline needs of a request beyond sessNode.
type sessTimes struct {
	sched, first int64 // trace.Null when absent
	in, gen      int64
}

func orNull(v int64, ok bool) int64 {
	if ok {
		return v
	}
	return trace.Null
}

func newSessions(limit int) *sessions { return &sessions{key: newStrKey(), limit: limit} }

func (s *sessions) add(sc int32, rd *reader, i int, v *rowv, hasArr bool, arr, fin int64, hasFin bool) {
	n := sessNode{sess: sc, id: strings.Clone(trace.StringAt(rd.reqID, i)), root: hasArr, arr: trace.Null, fin: trace.Null,
		e2e: trace.Null, delay: rd.delay.or(i, 0), loop: rd.loop.or(i, 0), tool: v.tool, completed: v.st == stCompleted,
		cut: v.st == stUnfinished}
	if n.cut && rd.reason != nil && trace.StringAt(rd.reason, i) == "arrives after horizon" {
		n.late = true
	}
	if rd.step != nil {
		n.step = strings.Clone(trace.StringAt(rd.step, i))
	}
	if v.hasEff {
		n.arr = v.eff
	}
	if hasFin && n.completed {
		n.fin = fin
	}
	if v.hasE2E {
		n.e2e = v.e2e
	}
	if l, ok := rd.deps.(*array.List); ok && !l.IsNull(i) {
		start, end := l.ValueOffsets(i)
		for j := start; j < end; j++ {
			n.deps = append(n.deps, strings.Clone(trace.StringAt(l.ListValues(), int(j))))
		}
	}
	_ = arr
	s.nodes = append(s.nodes, n)
}

// toolTime is how long a tool call held its session: from its last
// dependency's finish (or its own arrival) to its finish; delay_us when it
// never finished.
func (s *sessions) toolTime(n *sessNode, byID map[string]int32) int64 {
	if n.fin == trace.Null {
		return n.delay
	}
	ready := int64(trace.Null)
	for _, d := range n.deps {
		if p, ok := byID[d]; ok && s.nodes[p].fin != trace.Null {
			ready = max(ready, s.nodes[p].fin)
		}
	}
	if ready == trace.Null {
		ready = n.arr
	}
	if ready == trace.Null {
		return n.delay
	}
	return n.fin - ready
}

// fanOut counts a session's reached steps, whether it was cut at the
// horizon, and its fan-out instances (two or more requests with the same
// step_id and loop_iteration): spawned = arrived, finished = completed.
func (st *sessStats) fanOut(nodes []sessNode, members []int32) {
	var reached int64
	cut := false
	for _, j := range members {
		n := &nodes[j]
		cut = cut || n.cut
		if n.arr != trace.Null && !n.late {
			reached++
		}
	}
	if reached == 0 {
		return // the session starts after the horizon: never started, not cut
	}
	st.reached.Add(reached)
	if cut {
		st.cut++
		st.reachedCut.Add(reached)
	}
	ms := slices.Clone(members)
	slices.SortStableFunc(ms, func(a, b int32) int {
		x, y := &nodes[a], &nodes[b]
		if c := strings.Compare(x.step, y.step); c != 0 {
			return c
		}
		return int(x.loop - y.loop)
	})
	for lo := 0; lo < len(ms); {
		hi := lo + 1
		for hi < len(ms) && nodes[ms[hi]].step == nodes[ms[lo]].step && nodes[ms[hi]].loop == nodes[ms[lo]].loop {
			hi++
		}
		if hi-lo >= 2 && nodes[ms[lo]].step != "" {
			for _, j := range ms[lo:hi] {
				if nodes[j].arr != trace.Null && !nodes[j].late {
					st.fanSpawned++
				}
				if nodes[j].completed {
					st.fanFinished++
				}
			}
		}
		lo = hi
	}
}

// Session statistics, in table order.
const (
	sE2E = iota
	sSteps
	sLLM
	sTool
	sToolWait
	sLoops
	sCrit
	sCritSteps
	nSess
)

var sessNames = [nSess]string{"session_e2e", "steps", "llm_calls", "tool_calls", "tool_wait", "loop_iterations",
	"critical_path", "critical_path_steps"}

var sessIsTime = [nSess]bool{sE2E: true, sToolWait: true, sCrit: true}

type sessStats struct {
	total, complete, dangling int64
	d                         [nSess]*Dist
	// Sessions cut at the horizon (a request unfinished) and the steps every
	// session reached (requests that arrived), cut ones included.
	cut                     int64
	reached, reachedCut     *Dist
	fanSpawned, fanFinished int64 // fan-out instances that arrived / completed
}

// summarize computes one value per complete session (every request completed)
// for each statistic.
func (s *sessions) summarize() *sessStats {
	st := &sessStats{reached: newDist(s.limit), reachedCut: newDist(s.limit)}
	for k := range st.d {
		st.d[k] = newDist(s.limit)
	}
	byID := make(map[string]int32, len(s.nodes))
	for j := range s.nodes {
		byID[s.nodes[j].id] = int32(j)
	}
	order := make([]int32, len(s.nodes))
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return int(s.nodes[a].sess) - int(s.nodes[b].sess) })
	var loops []int64
	for lo := 0; lo < len(order); {
		hi := lo
		for hi < len(order) && s.nodes[order[hi]].sess == s.nodes[order[lo]].sess {
			hi++
		}
		members := order[lo:hi]
		lo = hi
		st.total++
		var llm, tool, toolWait int64
		loops = loops[:0]
		for _, j := range members {
			n := &s.nodes[j]
			if n.tool {
				tool++
				toolWait += s.toolTime(n, byID)
			} else {
				llm++
			}
			loops = append(loops, n.loop)
			for _, d := range n.deps {
				if _, ok := byID[d]; !ok {
					st.dangling++
				}
			}
		}
		st.fanOut(s.nodes, members)
		first, last, lastIdx, complete := s.sessSpan(members)
		if !complete {
			continue
		}
		st.complete++
		slices.Sort(loops)
		st.d[sE2E].Add(last - first)
		st.d[sSteps].Add(int64(len(members)))
		st.d[sLLM].Add(llm)
		st.d[sTool].Add(tool)
		st.d[sToolWait].Add(toolWait)
		st.d[sLoops].Add(int64(len(slices.Compact(loops))))
		chain := s.critChain(lastIdx, byID)
		start := s.nodes[chain[len(chain)-1]].arr
		if start == trace.Null {
			start = first
		}
		st.d[sCrit].Add(last - start)
		st.d[sCritSteps].Add(int64(len(chain)))
	}
	return st
}

// critChain walks back from the last finisher through the dependency that
// finished last (ties: the earlier row): the chain that gated the session's
// end, last request first.
func (s *sessions) critChain(last int32, byID map[string]int32) []int32 {
	chain := []int32{last}
	cur := last
	seen := map[int32]bool{cur: true}
	for {
		best := int32(-1)
		for _, d := range s.nodes[cur].deps {
			p, ok := byID[d]
			if !ok || seen[p] || s.nodes[p].fin == trace.Null {
				continue
			}
			if best < 0 || s.nodes[p].fin > s.nodes[best].fin || (s.nodes[p].fin == s.nodes[best].fin && p < best) {
				best = p
			}
		}
		if best < 0 {
			return chain
		}
		cur = best
		seen[cur] = true
		chain = append(chain, cur)
	}
}
