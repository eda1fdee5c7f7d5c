package bundle

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/engine/policy"
)

// node is a decision-tree node: a condition with two branches, or a leaf.
type node struct {
	line      int
	cond      *expr
	then, els *node
	// leaves
	verdict  policy.Verdict // admission
	reason   string
	delayUS  int64
	route    string
	params   policy.Params
	routeIdx int   // index of the leaf's routing policy in a Runtime
	waitUS   int64 // routing: hold the request this long instead (> 0)
	score    *expr // routing (per candidate), scheduler, preemption
	replicas int64 // autoscaler: an absolute count …
	delta    int64 // … or a change
	absolute bool
}

// maxTreeDepth bounds a tree's depth (and the parser's recursion).
const maxTreeDepth = 64

// leafKeys are the leaf actions of each stage.
var leafKeys = map[string][]string{
	StageAdmission:  {"admit", "reason", "delay_us"},
	StagePriority:   {"priority"},
	StageRouting:    {"route", "params", "score", "wait_us", "reason"},
	StageScheduler:  {"score"},
	StagePreemption: {"score"},
	StageAutoscaler: {"replicas", "delta"},
}

// treeInfo is what a stage's tree needs from the views, found at load.
type treeInfo struct {
	perCandidate bool // routing by score: evaluated for each candidate
	used         map[string]bool
	routes       []*node // route leaves, in order
}

func (p *parser) tree(n *yaml.Node, path, stage string) (*node, *treeInfo, error) {
	info := &treeInfo{used: map[string]bool{}}
	if stage == StageRouting {
		info.perCandidate = hasKey(n, "score", 0)
		if info.perCandidate && hasKey(n, "route", 0) {
			return nil, nil, p.errf(n, path, "a routing tree has either route leaves (a policy for the request) or score leaves (a score per candidate), not both")
		}
	}
	nd, err := p.treeNode(n, path, stage, 0, info)
	return nd, info, err
}

// hasKey reports whether any mapping in the tree has key k.
func hasKey(n *yaml.Node, k string, depth int) bool {
	if n.Kind != yaml.MappingNode || depth > maxTreeDepth {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return true
		}
		if v := n.Content[i].Value; (v == "then" || v == "else") && hasKey(n.Content[i+1], k, depth+1) {
			return true
		}
	}
	return false
}

func (p *parser) treeNode(n *yaml.Node, path, stage string, depth int, info *treeInfo) (*node, error) {
	if depth > maxTreeDepth {
		return nil, p.errf(n, path, "tree deeper than %d levels", maxTreeDepth)
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, path, "expected a node: {if: <condition>, then: <node>, else: <node>} or a leaf (%s), found %s", strings.Join(leafKeys[stage], ", "), describe(n))
	}
	nd := &node{line: n.Line}
	if hasDirectKey(n, "if") {
		vals, _, err := p.mapping(n, path, []string{"if", "then", "else"})
		if err != nil {
			return nil, err
		}
		for _, k := range []string{"then", "else"} {
			if vals[k] == nil {
				return nil, p.errf(n, path, "missing %s", k)
			}
		}
		src, err := p.str(vals["if"], path+".if")
		if err != nil {
			return nil, err
		}
		if nd.cond, err = p.expr(vals["if"], path+".if", src, stage, info); err != nil {
			return nil, err
		}
		if nd.cond.k != kBool {
			return nil, p.errf(vals["if"], path+".if", "expected a condition (a comparison), found a %s expression", nd.cond.k)
		}
		if nd.then, err = p.treeNode(vals["then"], path+".then", stage, depth+1, info); err != nil {
			return nil, err
		}
		if nd.els, err = p.treeNode(vals["else"], path+".else", stage, depth+1, info); err != nil {
			return nil, err
		}
		return nd, nil
	}
	vals, _, err := p.mapping(n, path, append([]string{"if", "then", "else"}, leafKeys[stage]...))
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"then", "else"} {
		if vals[k] != nil {
			return nil, p.errf(vals[k], path+"."+k, "%s without if", k)
		}
	}
	switch stage {
	case StageAdmission:
		a := vals["admit"]
		if a == nil {
			return nil, p.errf(n, path, "missing admit (admit, reject or delay)")
		}
		v, err := p.str(a, path+".admit")
		if err != nil {
			return nil, err
		}
		switch v {
		case "admit":
			nd.verdict = policy.Admit
		case "reject":
			nd.verdict = policy.Reject
			nd.reason = "decision tree: reject (line " + strconv.Itoa(n.Line) + ")"
		case "delay":
			nd.verdict = policy.Delay
			d := vals["delay_us"]
			if d == nil {
				return nil, p.errf(n, path, "admit: delay needs delay_us (> 0)")
			}
			if nd.delayUS, err = p.integer(d, path+".delay_us", 1, 1<<50); err != nil {
				return nil, err
			}
		default:
			return nil, p.errf(a, path+".admit", "expected admit, reject or delay, found %q", v)
		}
		if r := vals["reason"]; r != nil {
			if nd.reason, err = p.str(r, path+".reason"); err != nil {
				return nil, err
			}
		}
		if vals["delay_us"] != nil && nd.verdict != policy.Delay {
			return nil, p.errf(vals["delay_us"], path+".delay_us", "only with admit: delay")
		}
	case StagePriority:
		v := vals["priority"]
		if v == nil {
			return nil, p.errf(n, path, "missing priority (a number or an expression: a score, larger runs first)")
		}
		if nd.score, err = p.scoreExpr(v, path+".priority", stage, info); err != nil {
			return nil, err
		}
	case StageRouting:
		if s := vals["score"]; s != nil {
			if nd.score, err = p.scoreExpr(s, path+".score", stage, info); err != nil {
				return nil, err
			}
			for _, k := range []string{"params", "wait_us", "reason"} {
				if vals[k] != nil {
					return nil, p.errf(vals[k], path+"."+k, "not in a score leaf (a tree evaluated for each candidate cannot hold the request: give route leaves)")
				}
			}
			break
		}
		if w := vals["wait_us"]; w != nil {
			// A hold: the request waits at the router and is routed again
			// wait_us later (docs/policies.md).
			if vals["route"] != nil || vals["params"] != nil {
				k := "route"
				if vals["route"] == nil {
					k = "params"
				}
				return nil, p.errf(vals[k], path+"."+k, "a leaf routes the request or holds it (wait_us), not both")
			}
			if nd.waitUS, err = p.integer(w, path+".wait_us", 1, 1<<50); err != nil {
				return nil, err
			}
			nd.reason = "decision tree: wait (line " + strconv.Itoa(n.Line) + ")"
			if r := vals["reason"]; r != nil {
				if nd.reason, err = p.str(r, path+".reason"); err != nil {
					return nil, err
				}
			}
			break
		}
		if vals["reason"] != nil {
			return nil, p.errf(vals["reason"], path+".reason", "only with wait_us (a route leaf's reason is its template's)")
		}
		r := vals["route"]
		if r == nil {
			return nil, p.errf(n, path, "missing route (a routing template: %s), wait_us (hold the request at the router, µs) or score (an expression per candidate)", strings.Join(policy.Names(policy.StageRouting), ", "))
		}
		if nd.route, err = p.str(r, path+".route"); err != nil {
			return nil, err
		}
		t, err := policy.Find(policy.StageRouting, nd.route)
		if err != nil {
			return nil, p.errf(r, path+".route", "%v", err)
		}
		raw := policy.Params{}
		if pn := vals["params"]; pn != nil {
			pv, _, err := p.mapping(pn, path+".params", paramNames(t))
			if err != nil {
				return nil, err
			}
			for i := 0; i+1 < len(pn.Content); i += 2 {
				k := pn.Content[i].Value
				if raw[k], err = p.num(pv[k], path+".params."+k); err != nil {
					return nil, err
				}
			}
		}
		if nd.params, err = t.Resolve(raw); err != nil {
			return nil, p.errf(r, path+".route", "%v", err)
		}
		nd.routeIdx = len(info.routes)
		info.routes = append(info.routes, nd)
	case StageScheduler, StagePreemption:
		s := vals["score"]
		if s == nil {
			return nil, p.errf(n, path, "missing score (an expression per request; the highest goes first / is preempted)")
		}
		if nd.score, err = p.scoreExpr(s, path+".score", stage, info); err != nil {
			return nil, err
		}
	case StageAutoscaler:
		r, d := vals["replicas"], vals["delta"]
		switch {
		case r != nil && d != nil:
			return nil, p.errf(d, path+".delta", "give replicas or delta, not both")
		case r != nil:
			nd.absolute = true
			if nd.replicas, err = p.integer(r, path+".replicas", 0, 1<<20); err != nil {
				return nil, err
			}
		case d != nil:
			if nd.delta, err = p.integer(d, path+".delta", -(1 << 20), 1<<20); err != nil {
				return nil, err
			}
		default:
			return nil, p.errf(n, path, "missing replicas (a target count) or delta (a change)")
		}
	}
	return nd, nil
}

func hasDirectKey(n *yaml.Node, k string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return true
		}
	}
	return false
}

func (p *parser) expr(n *yaml.Node, path, src, stage string, info *treeInfo) (*expr, error) {
	c := &exprCompiler{roots: stageRoots(stage, info.perCandidate), used: info.used, noOutput: p.noOutput}
	e, err := c.compile(src)
	if err != nil {
		msg := err.Error()
		if stage == StageRouting && !info.perCandidate && strings.Contains(msg, `"replica"`) {
			msg += " (replica fields need score leaves: a tree evaluated for each candidate)"
		}
		return nil, p.errf(n, path, "%s: %s", strconv.Quote(src), msg)
	}
	return e, nil
}

// scoreExpr is a number or an expression string giving a number.
func (p *parser) scoreExpr(n *yaml.Node, path, stage string, info *treeInfo) (*expr, error) {
	if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
		v, err := p.num(n, path)
		if err != nil {
			return nil, err
		}
		return &expr{k: kFloat, f: func(*evalCtx) float64 { return v }}, nil
	}
	src, err := p.str(n, path)
	if err != nil {
		return nil, err
	}
	e, err := p.expr(n, path, src, stage, info)
	if err != nil {
		return nil, err
	}
	if !numeric(e.k) {
		return nil, p.errf(n, path, "%s: expected a number, found a %s expression", strconv.Quote(src), e.k)
	}
	return &expr{k: kFloat, f: e.float()}, nil
}

// eval walks the tree to its leaf.
func (n *node) eval(c *evalCtx) *node {
	for n.cond != nil {
		if n.cond.b(c) {
			n = n.then
		} else {
			n = n.els
		}
	}
	return n
}
