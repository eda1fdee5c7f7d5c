package bundle

import (
	"fmt"
	"strings"

	"go.starlark.net/syntax"
)

// Decision-tree conditions and scores are expressions in Starlark's syntax
// (parsed by go.starlark.net/syntax, so that trees and Starlark policies
// read alike), compiled here to typed Go closures over the views: no
// Starlark interpreter, no allocation per evaluation. The language is
// small: view fields (root.field), int, float, string and bool constants,
// comparisons, and/or/not, + - * / and unary minus.

// expr is a compiled expression; exactly one getter is set, by k.
type expr struct {
	k kind
	i func(*evalCtx) int64
	f func(*evalCtx) float64
	s func(*evalCtx) string
	b func(*evalCtx) bool
}

func (e *expr) float() func(*evalCtx) float64 {
	if e.k == kInt {
		g := e.i
		return func(c *evalCtx) float64 { return float64(g(c)) }
	}
	return e.f
}

// roots are the views an expression may name, by stage.
type roots map[string]fieldTable

func stageRoots(stage string, perCandidate bool) roots {
	switch stage {
	case StageAdmission, StagePriority:
		return roots{"request": requestTable, "tenant": tenantTable, "router": routerTable, "cluster": clusterTable}
	case StageRouting:
		r := roots{"request": requestTable, "tenant": tenantTable, "router": routerTable, "cluster": clusterTable}
		if perCandidate {
			r["replica"] = replicaTable
		}
		return r
	case StageScheduler, StagePreemption:
		return roots{"request": schedRequestTable}
	case StageAutoscaler:
		return roots{"pool": poolTable}
	}
	return nil
}

type exprCompiler struct {
	roots    roots
	used     map[string]bool // roots named
	noOutput bool            // request.output_tokens is unknown (no predictor, no oracle)
}

func (c *exprCompiler) errf(pos syntax.Position, format string, args ...any) error {
	return &exprError{col: int(pos.Col), msg: fmt.Sprintf(format, args...)}
}

type exprError struct {
	col int
	msg string
}

func (e *exprError) Error() string { return e.msg }

// compileExpr parses and compiles src.
func (c *exprCompiler) compile(src string) (*expr, error) {
	x, err := fileOptions.ParseExpr("expr", src, 0)
	if err != nil {
		msg := err.Error()
		if se, ok := err.(syntax.Error); ok {
			msg = se.Msg
		}
		return nil, &exprError{msg: "syntax error: " + msg}
	}
	return c.expr(x)
}

func (c *exprCompiler) expr(x syntax.Expr) (*expr, error) {
	switch x := x.(type) {
	case *syntax.ParenExpr:
		return c.expr(x.X)
	case *syntax.Literal:
		switch v := x.Value.(type) {
		case int64:
			return &expr{k: kInt, i: func(*evalCtx) int64 { return v }}, nil
		case float64:
			return &expr{k: kFloat, f: func(*evalCtx) float64 { return v }}, nil
		case string:
			if x.Token == syntax.STRING { // not b'...': bytes never equal a view's strings
				return &expr{k: kString, s: func(*evalCtx) string { return v }}, nil
			}
		}
		return nil, c.errf(x.TokenPos, "unsupported constant %s (expected an int, a float or a string)", x.Raw)
	case *syntax.Ident:
		switch x.Name {
		case "True", "true":
			return &expr{k: kBool, b: func(*evalCtx) bool { return true }}, nil
		case "False", "false":
			return &expr{k: kBool, b: func(*evalCtx) bool { return false }}, nil
		}
		return nil, c.errf(x.NamePos, "%s: expected a view field such as request.input_tokens (views: %s)", x.Name, c.rootNames())
	case *syntax.DotExpr:
		id, ok := x.X.(*syntax.Ident)
		if !ok {
			return nil, c.errf(x.Dot, "expected <view>.<field>")
		}
		t, ok := c.roots[id.Name]
		if !ok {
			return nil, c.errf(id.NamePos, "unknown view %q here (expected %s)", id.Name, c.rootNames())
		}
		f, ok := t[x.Name.Name]
		if !ok {
			return nil, c.errf(x.Name.NamePos, "unknown field %s.%s (expected one of %s)", id.Name, x.Name.Name, strings.Join(t.names(), ", "))
		}
		if c.noOutput && id.Name == "request" && f.name == "output_tokens" {
			return nil, c.errf(x.Name.NamePos, "%v", errNoOutput())
		}
		c.used[id.Name] = true
		switch {
		case id.Name == "tenant" || id.Name == "router":
			c.used["tracker"] = true
		case id.Name == "replica" && (f.name == "cache_hit_rate" || f.name == "recent_ttft_us" || f.name == "recent_tpot_us" || f.name == "estimated_wait_us"):
			c.used["tracker"] = true
		}
		if id.Name == "replica" && f.name == "cached_blocks" {
			c.used["prefix"] = true
		}
		return &expr{k: f.k, i: f.i, f: f.f, s: f.s, b: f.b}, nil
	case *syntax.UnaryExpr:
		e, err := c.expr(x.X)
		if err != nil {
			return nil, err
		}
		switch x.Op {
		case syntax.NOT:
			if e.k != kBool {
				return nil, c.errf(x.OpPos, "not: expected a condition, found a %s", e.k)
			}
			g := e.b
			return &expr{k: kBool, b: func(c *evalCtx) bool { return !g(c) }}, nil
		case syntax.MINUS:
			switch e.k {
			case kInt:
				g := e.i
				return &expr{k: kInt, i: func(c *evalCtx) int64 { return -g(c) }}, nil
			case kFloat:
				g := e.f
				return &expr{k: kFloat, f: func(c *evalCtx) float64 { return -g(c) }}, nil
			}
			return nil, c.errf(x.OpPos, "-: expected a number, found a %s", e.k)
		}
		return nil, c.errf(x.OpPos, "unsupported operator %s", x.Op)
	case *syntax.BinaryExpr:
		a, err := c.expr(x.X)
		if err != nil {
			return nil, err
		}
		b, err := c.expr(x.Y)
		if err != nil {
			return nil, err
		}
		return c.binary(x, a, b)
	}
	start, _ := x.Span()
	return nil, c.errf(start, "unsupported expression (expected fields, constants, comparisons, and/or/not, + - * /)")
}

func (c *exprCompiler) rootNames() string {
	var out []string
	for _, r := range []string{"request", "replica", "tenant", "router", "cluster", "pool"} {
		if _, ok := c.roots[r]; ok {
			out = append(out, r)
		}
	}
	return strings.Join(out, ", ")
}

func numeric(k kind) bool { return k == kInt || k == kFloat }

func (c *exprCompiler) binary(x *syntax.BinaryExpr, a, b *expr) (*expr, error) {
	op := x.Op
	switch op {
	case syntax.AND, syntax.OR:
		if a.k != kBool || b.k != kBool {
			return nil, c.errf(x.OpPos, "%s: expected conditions on both sides, found a %s and a %s", op, a.k, b.k)
		}
		ga, gb := a.b, b.b
		if op == syntax.AND {
			return &expr{k: kBool, b: func(c *evalCtx) bool { return ga(c) && gb(c) }}, nil
		}
		return &expr{k: kBool, b: func(c *evalCtx) bool { return ga(c) || gb(c) }}, nil
	case syntax.EQL, syntax.NEQ, syntax.LT, syntax.LE, syntax.GT, syntax.GE:
		return c.compare(x, a, b)
	case syntax.PLUS, syntax.MINUS, syntax.STAR, syntax.SLASH:
		if !numeric(a.k) || !numeric(b.k) {
			return nil, c.errf(x.OpPos, "%s: expected numbers on both sides, found a %s and a %s", op, a.k, b.k)
		}
		if a.k == kInt && b.k == kInt && op != syntax.SLASH {
			ga, gb := a.i, b.i
			switch op {
			case syntax.PLUS:
				return &expr{k: kInt, i: func(c *evalCtx) int64 { return ga(c) + gb(c) }}, nil
			case syntax.MINUS:
				return &expr{k: kInt, i: func(c *evalCtx) int64 { return ga(c) - gb(c) }}, nil
			default:
				return &expr{k: kInt, i: func(c *evalCtx) int64 { return ga(c) * gb(c) }}, nil
			}
		}
		ga, gb := a.float(), b.float()
		switch op {
		case syntax.PLUS:
			return &expr{k: kFloat, f: func(c *evalCtx) float64 { return ga(c) + gb(c) }}, nil
		case syntax.MINUS:
			return &expr{k: kFloat, f: func(c *evalCtx) float64 { return ga(c) - gb(c) }}, nil
		case syntax.STAR:
			return &expr{k: kFloat, f: func(c *evalCtx) float64 { return ga(c) * gb(c) }}, nil
		default:
			// x/0 is ±Inf or NaN (never a panic); a condition on NaN is false.
			return &expr{k: kFloat, f: func(c *evalCtx) float64 { return ga(c) / gb(c) }}, nil
		}
	}
	return nil, c.errf(x.OpPos, "unsupported operator %s", op)
}

func (c *exprCompiler) compare(x *syntax.BinaryExpr, a, b *expr) (*expr, error) {
	op := x.Op
	switch {
	case a.k == kInt && b.k == kInt:
		ga, gb := a.i, b.i
		return &expr{k: kBool, b: cmp(op, func(c *evalCtx) (int64, int64) { return ga(c), gb(c) })}, nil
	case numeric(a.k) && numeric(b.k):
		ga, gb := a.float(), b.float()
		return &expr{k: kBool, b: cmp(op, func(c *evalCtx) (float64, float64) { return ga(c), gb(c) })}, nil
	case a.k == kString && b.k == kString:
		ga, gb := a.s, b.s
		return &expr{k: kBool, b: cmp(op, func(c *evalCtx) (string, string) { return ga(c), gb(c) })}, nil
	case a.k == kBool && b.k == kBool && (op == syntax.EQL || op == syntax.NEQ):
		ga, gb := a.b, b.b
		if op == syntax.EQL {
			return &expr{k: kBool, b: func(c *evalCtx) bool { return ga(c) == gb(c) }}, nil
		}
		return &expr{k: kBool, b: func(c *evalCtx) bool { return ga(c) != gb(c) }}, nil
	}
	return nil, c.errf(x.OpPos, "%s: cannot compare a %s with a %s", op, a.k, b.k)
}

func cmp[T int64 | float64 | string](op syntax.Token, get func(*evalCtx) (T, T)) func(*evalCtx) bool {
	switch op {
	case syntax.EQL:
		return func(c *evalCtx) bool { x, y := get(c); return x == y }
	case syntax.NEQ:
		return func(c *evalCtx) bool { x, y := get(c); return x != y }
	case syntax.LT:
		return func(c *evalCtx) bool { x, y := get(c); return x < y }
	case syntax.LE:
		return func(c *evalCtx) bool { x, y := get(c); return x <= y }
	case syntax.GT:
		return func(c *evalCtx) bool { x, y := get(c); return x > y }
	default:
		return func(c *evalCtx) bool { x, y := get(c); return x >= y }
	}
}
