package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine/internal/scenario"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/row"
)

// TestScenarios runs testdata/*.txt: the built-in router policies deciding
// over a hand-made board (docs/engine.md, "Scenario tests"). Commands:
//
//	board [tree=on|off] [index]   a board; input lines are its replicas:
//	        <id> waiting=N running=N inflight=N kv=used/total cached=blocks
//	        (cached: leading prompt blocks of the requests routed next it
//	        holds; index: the oracle enumerates holders, as the cluster's
//	        global prefix index does)
//	set <id> waiting=N ...        change one replica's status
//	inflight <id> [n=1]           count requests just routed there
//	policy admission=|priority=|routing=<template> [seed=N] [params...]
//	        build built-in policies (policy.Templates); params are the
//	        template's (limit=, load=, kv=, prefix=)
//	route [n=1] [place] [scores] [blocks=N]
//	        route n requests (blocks: their prompt's keyed blocks); place
//	        counts each in flight on its target; scores prints them
//	admit [n=1] [place]           admission decisions
//	priority prio=N               the priority stage's answer
//	print                         the board
func TestScenarios(t *testing.T) {
	scenario.Run(t, func() scenario.Harness { return (&harness{}).do })
}

type harness struct {
	b      *policy.Board
	ids    []string
	cached []int
	index  bool
	adm    policy.Admission
	pri    policy.Priority
	rout   policy.Routing
	n      int // requests decided so far (their ids: q1, q2, ...)
}

// CachedBlocks and Holders make the harness the prefix oracle.
func (h *harness) CachedBlocks(i int) int { return h.cached[i] }

func (h *harness) Holders() ([]int32, bool) {
	if !h.index {
		return nil, false
	}
	var out []int32
	for i, c := range h.cached {
		if c > 0 {
			out = append(out, int32(i))
		}
	}
	return out, true
}

func (h *harness) do(t *testing.T, td *datadriven.TestData) string {
	a := scenario.Of(t, td)
	var log scenario.Log
	if td.Cmd != "board" && h.b == nil {
		a.Fatalf("%s before board", td.Cmd)
	}
	switch td.Cmd {
	case "board":
		tree := map[string]int{"auto": 0, "on": 1, "off": -1}[a.Str("tree", "auto")]
		h.index = a.Bool("index", false)
		a.Done()
		lines := scenario.Lines(t, td)
		h.ids, h.cached = nil, nil
		deps, roles := make([]string, len(lines)), make([]string, len(lines))
		for i, l := range lines {
			h.ids = append(h.ids, l.Name)
			deps[i], roles[i] = l.Str("deployment", "d"), l.Str("role", "monolithic")
			h.cached = append(h.cached, 0)
		}
		h.b = policy.NewBoard(h.ids, deps, roles, tree)
		for i, l := range lines {
			h.set(l.Args, i)
		}
		h.print(&log)
	case "set":
		for _, id := range a.Names() {
			h.set(a, h.index0(a, id))
		}
		a.Done()
		h.print(&log)
	case "inflight":
		n := a.Int("n", 1)
		for _, id := range a.Names() {
			i := h.index0(a, id)
			for k := int64(0); k < n; k++ {
				h.b.AddInFlight(i)
			}
		}
		a.Done()
		h.print(&log)
	case "policy":
		env := policy.Env{Seed: uint64(a.Int("seed", 42))}
		stages := []struct {
			stage policy.Stage
			name  string
		}{{policy.StageAdmission, a.Str("admission", "")}, {policy.StagePriority, a.Str("priority", "")},
			{policy.StageRouting, a.Str("routing", "")}}
		params := a.Rest()
		a.Done()
		for _, s := range stages {
			if s.name == "" {
				continue
			}
			p, err := policy.Build(s.stage, s.name, params, env)
			if err != nil {
				log.Printf("error: %v", err)
				continue
			}
			switch x := p.(type) {
			case policy.Admission:
				h.adm = x
			case policy.Priority:
				h.pri = x
			case policy.Routing:
				h.rout = x
			}
			if s.stage == policy.StageRouting {
				log.Printf("%s: %s (reads the prefix cache: %v, blind: %v)", s.stage, policy.NameOf(p), policy.ReadsPrefix(p), policy.Blind(p))
			} else {
				log.Printf("%s: %s (blind: %v)", s.stage, policy.NameOf(p), policy.Blind(p))
			}
		}
	case "route":
		n := a.Int("n", 1)
		place, scores := a.Bool("place", false), a.Bool("scores", false)
		blocks := int(a.Int("blocks", 0))
		a.Done()
		if h.rout == nil {
			a.Fatalf("route: no routing policy")
		}
		for k := int64(0); k < n; k++ {
			rv, q := h.request(blocks)
			v := h.b.View(0, h, scores)
			d := h.rout.Route(rv, v)
			s := fmt.Sprintf("%s -> %s: %s", q, h.ids[d.Target], d.Reason)
			if sc := v.Scores(); sc != nil {
				var parts []string
				for i, x := range sc {
					parts = append(parts, fmt.Sprintf("%s=%.4g", h.ids[i], x))
				}
				s += " [" + strings.Join(parts, " ") + "]"
			}
			log.Printf("%s", s)
			if place {
				h.b.AddInFlight(d.Target)
			}
		}
	case "admit":
		n := a.Int("n", 1)
		place := a.Bool("place", false)
		a.Done()
		if h.adm == nil {
			a.Fatalf("admit: no admission policy")
		}
		for k := int64(0); k < n; k++ {
			rv, q := h.request(0)
			v := h.b.View(0, h, false)
			d := h.adm.Admit(rv, v)
			s := fmt.Sprintf("%s %s", q, d.Verdict)
			if d.Reason != "" {
				s += ": " + d.Reason
			}
			if d.Verdict == policy.Admit && place {
				i := v.LeastLoaded()
				h.b.AddInFlight(i)
				s += fmt.Sprintf(" (placed on %s)", h.ids[i])
			}
			log.Printf("%s", s)
		}
	case "priority":
		prio := int32(a.Int("prio", 0))
		a.Done()
		if h.pri == nil {
			a.Fatalf("priority: no priority policy")
		}
		h.n++
		r := row.NewRequest(fmt.Sprintf("q%d", h.n))
		r.InputTokens, r.Priority = 16, prio
		log.Printf("%s (priority column %d) -> %g", r.ID, prio, h.pri.Priority(policy.NewRequestView(&r, 0, nil), h.b.View(0, h, false)))
	case "print":
		a.Done()
		h.print(&log)
	default:
		a.Fatalf("unknown command %q", td.Cmd)
	}
	return log.String()
}

// request is the next request to decide about, with blocks keyed prompt
// blocks.
func (h *harness) request(blocks int) (policy.RequestView, string) {
	h.n++
	r := row.NewRequest(fmt.Sprintf("q%d", h.n))
	r.InputTokens = int32(16 * max(blocks, 1))
	return policy.NewRequestView(&r, 0, func() int { return blocks }), r.ID
}

func (h *harness) index0(a *scenario.Args, id string) int {
	for i, x := range h.ids {
		if x == id {
			return i
		}
	}
	a.Fatalf("no replica %s on the board", id)
	return -1
}

// set applies a line's status keys to replica i.
func (h *harness) set(a *scenario.Args, i int) {
	s := h.b.Status(i)
	s.Waiting = int(a.Int("waiting", int64(s.Waiting)))
	s.Running = int(a.Int("running", int64(s.Running)))
	s.InFlight = int(a.Int("inflight", int64(s.InFlight)))
	if kv := a.Strs("kv"); kv != nil {
		used, total, ok := strings.Cut(kv[0], "/")
		u, err1 := scenario.ParseInt(used)
		tt, err2 := scenario.ParseInt(total)
		if len(kv) != 1 || !ok || err1 != nil || err2 != nil {
			a.Fatalf("kv: expected used/total, found %v", kv)
		}
		s.KVUsed, s.KVTotal = u, tt
	}
	h.cached[i] = int(a.Int("cached", int64(h.cached[i])))
	a.Done()
	h.b.Set(i, s)
}

func (h *harness) print(log *scenario.Log) {
	v := h.b.View(0, h, false)
	for i := 0; i < v.Len(); i++ {
		r := v.Replica(i)
		log.Printf("%s: load %d (%d waiting, %d running, %d in flight), kv %d/%d, %d blocks cached",
			r.ID(), r.Load(), r.Waiting(), r.Running(), r.InFlight(), r.KVUsed(), r.KVTotal(), h.cached[i])
	}
	log.Printf("least loaded: %s", h.ids[v.LeastLoaded()])
}
