package bundle

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"

	starmath "go.starlark.net/lib/math"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/blis-sim/blis/lib/rng"
)

// entrypoints are the function each stage's Starlark must define, with
// its parameters.
var entrypoints = map[string][2]string{
	StageAdmission:  {"admit", "request, cluster"},
	StagePriority:   {"priority", "request, cluster"},
	StageRouting:    {"route", "request, cluster"},
	StageScheduler:  {"schedule", "queue, replica"},
	StagePreemption: {"preempt", "running, replica"},
	StageAutoscaler: {"scale", "pool, cluster"},
}

// starProgram is a stage's compiled Starlark.
type starProgram struct {
	st   *Stage
	prog *starlark.Program
}

// fileOptions: no while, no recursion, no set, no top-level control flow,
// no global reassignment — a policy is a pure function of its views and
// its state dict, and every loop is bounded by the data it walks (plus
// the step budget).
var fileOptions = &syntax.FileOptions{}

// Names predeclared for every policy besides the universe: the engine's
// state dict, the sandbox's checked operators (the source's +, *, %,
// range, .join, .replace and .extend are compiled to them) and, if asked,
// a seeded random stream.
var checkedNames = []string{"_add", "_mul", "_mod", "_addeq", "_muleq", "_call", "range"}

func isPredeclared(random bool) func(string) bool {
	return func(name string) bool {
		if name == "state" || (random && name == "random") {
			return true
		}
		for _, n := range checkedNames {
			if n == name {
				return true
			}
		}
		return false
	}
}

func compileStar(st *Stage, src []byte, line int) (*starProgram, error) {
	if line > 0 {
		src = append([]byte(strings.Repeat("\n", line)), src...)
	}
	f, err := fileOptions.Parse(st.File, src, 0)
	if err != nil {
		return nil, fmt.Errorf("%v (%s policy)", err, st.Name)
	}
	rewriteFile(f)
	prog, err := starlark.FileProgram(f, isPredeclared(st.Random))
	if err != nil {
		return nil, fmt.Errorf("%v (%s policy)", err, st.Name)
	}
	sp := &starProgram{st: st, prog: prog}
	// Run the top level once now, so that a missing entrypoint or an
	// error at the top level is reported before the simulation.
	if _, err := sp.instantiate(&Runtime{b: st.b}, 0); err != nil {
		return nil, err
	}
	return sp, nil
}

// starRT is one run's instance of a Starlark stage.
type starRT struct {
	st     *Stage
	rt     *Runtime
	thread *starlark.Thread
	fn     *starlark.Function
	state  *starlark.Dict
	ctx    evalCtx
	gen    uint64
	alloc  int // units allocated by checked operations in this call

	boards map[any]*boardVals
	reqv   reqValue
	clv    clusterValue
	tenv   viewValue
	rouv   viewValue
	args   starlark.Tuple
	reqID  string
	random *randomValue // nil unless the stage sets random: true
}

// maxAllocPerCall bounds what one call may allocate through checked
// operations, in elements or bytes (the step budget bounds the rest).
const maxAllocPerCall = 1 << 24

func (sp *starProgram) instantiate(rt *Runtime, seed uint64) (*starRT, error) {
	st := sp.st
	r := &starRT{st: st, rt: rt, state: starlark.NewDict(0), boards: map[any]*boardVals{}}
	r.thread = &starlark.Thread{Name: st.Name, Print: func(*starlark.Thread, string) {}, Load: loadAllowed}
	if rt.g != nil {
		rt.g.register(r.thread)
	}
	r.reqv.r = r
	r.clv.r = r
	r.tenv = viewValue{r: r, typ: "tenant", t: tenantTable}
	r.rouv = viewValue{r: r, typ: "router", t: routerTable}
	r.args = make(starlark.Tuple, 2)
	pre := starlark.StringDict{"state": r.state}
	for name, fn := range r.checked() {
		pre[name] = fn
	}
	if st.Random {
		r.random = newRandom(rng.PCG(seed, "policy:"+st.Name))
		pre["random"] = r.random
	}
	r.thread.SetMaxExecutionSteps(st.MaxSteps)
	g, err := sp.prog.Init(r.thread, pre)
	if err != nil {
		return nil, r.runErr(err, "", 0)
	}
	g.Freeze()
	ep := entrypoints[st.Name]
	v, ok := g[ep[0]]
	if !ok {
		return nil, fmt.Errorf("%s: %s policy: no function %s(%s) defined", st.File, st.Name, ep[0], ep[1])
	}
	fn, ok := v.(*starlark.Function)
	if !ok {
		return nil, fmt.Errorf("%s: %s policy: %s is a %s, expected a function %s(%s)", st.File, st.Name, ep[0], v.Type(), ep[0], ep[1])
	}
	if fn.NumParams() != 2 || fn.HasVarargs() || fn.HasKwargs() {
		return nil, fmt.Errorf("%s:%d: %s policy: expected def %s(%s), found %d parameters", st.File, fn.Position().Line, st.Name, ep[0], ep[1], fn.NumParams())
	}
	r.fn = fn
	return r, nil
}

// allowedModules are the modules load() may name: deterministic helpers
// bundled with the simulator.
var allowedModules = map[string]starlark.StringDict{"math.star": {"math": starmath.Module}}

func loadAllowed(_ *starlark.Thread, module string) (starlark.StringDict, error) {
	if m, ok := allowedModules[module]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("load(%q): not allowed (a policy may load only math.star)", module)
}

// call runs the entrypoint with a fresh step budget: the stage's per-call
// budget, or what is left of the whole run's when that is less.
func (r *starRT) call(a, b starlark.Value, reqID string) (starlark.Value, error) {
	r.gen++
	r.alloc = 0
	r.reqID = reqID
	r.args[0], r.args[1] = a, b
	g := r.rt.g
	budget, capped := r.st.MaxSteps, false
	if g.maxSteps > 0 {
		if g.steps >= g.maxSteps {
			return nil, &RunError{File: r.st.File, Stage: r.st.Name, Request: reqID, Err: g.errRunBudget()}
		}
		if left := g.maxSteps - g.steps; left < budget {
			budget, capped = left, true
		}
	}
	before := r.thread.ExecutionSteps()
	r.thread.SetMaxExecutionSteps(before + budget)
	v, err := starlark.Call(r.thread, r.fn, r.args, nil)
	r.args[0], r.args[1] = nil, nil
	g.steps += r.thread.ExecutionSteps() - before
	if err != nil {
		if e := g.err(); e != nil {
			return nil, e // interrupted: the interruption's error, not the cancelled call's
		}
		if capped && strings.Contains(err.Error(), "too many steps") {
			re := r.runErr(err, reqID, 0).(*RunError)
			re.Err = g.errRunBudget()
			return nil, re
		}
		return nil, r.runErr(err, reqID, 0)
	}
	if r.state.Len() > 0 {
		if err := r.checkState(); err != nil {
			return nil, r.runErr(err, reqID, int(r.fn.Position().Line))
		}
	}
	return v, nil
}

// runErr locates err: the innermost Starlark frame's line.
func (r *starRT) runErr(err error, reqID string, line int) error {
	file := r.st.File
	msg := err.Error()
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		msg = ee.Msg
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if p := ee.CallStack[i].Pos; p.IsValid() && p.Filename() != "<builtin>" {
				file, line = p.Filename(), int(p.Line)
				break
			}
		}
	}
	if strings.Contains(msg, "too many steps") {
		msg = fmt.Sprintf("step budget exceeded: more than %d steps in one call (sandbox.max_steps)", r.st.MaxSteps)
	}
	return &RunError{File: file, Line: line, Stage: r.st.Name, Request: reqID, Err: errors.New(msg)}
}

// badReturn is a wrong return value, located at the entrypoint's def.
func (r *starRT) badReturn(format string, args ...any) error {
	return &RunError{File: r.st.File, Line: int(r.fn.Position().Line), Stage: r.st.Name, Request: r.reqID,
		Err: fmt.Errorf("%s returned %s", entrypoints[r.st.Name][0], fmt.Sprintf(format, args...))}
}

// checkState walks the state dict: only plain values (None, bool, int,
// float, string, list, tuple, dict), at most sandbox.max_state of them.
func (r *starRT) checkState() error {
	n := 0
	limit := r.st.b.Sandbox.MaxState
	var walk func(v starlark.Value, depth int) error
	walk = func(v starlark.Value, depth int) error {
		n++
		if n > limit {
			return fmt.Errorf("state holds more than %d values (sandbox.max_state)", limit)
		}
		if depth > 64 {
			return errors.New("state nested more than 64 deep")
		}
		switch v := v.(type) {
		case starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float, starlark.String:
		case *starlark.List:
			for i := 0; i < v.Len(); i++ {
				if err := walk(v.Index(i), depth+1); err != nil {
					return err
				}
			}
		case starlark.Tuple:
			for _, e := range v {
				if err := walk(e, depth+1); err != nil {
					return err
				}
			}
		case *starlark.Dict:
			for _, kv := range v.Items() {
				if err := walk(kv[0], depth+1); err != nil {
					return err
				}
				if err := walk(kv[1], depth+1); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("state may hold only None, bool, int, float, string, list, tuple and dict values, found a %s (keep numbers, not views)", v.Type())
		}
		return nil
	}
	return walk(r.state, 0)
}

// checked returns the sandbox's checked operators.
func (r *starRT) checked() map[string]*starlark.Builtin {
	bin := func(name string, op syntax.Token, eq bool) *starlark.Builtin {
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			x, y := args[0], args[1]
			if err := r.precheck(op, x, y); err != nil {
				return nil, err
			}
			if eq {
				return y, nil // x op= y: checked; the statement does the rest
			}
			v, err := starlark.Binary(op, x, y)
			if err != nil {
				return nil, err
			}
			if err := r.charge(v); err != nil {
				return nil, err
			}
			// _add(a, b, c, …) is ((a + b) + c) + …: a chain of + is one call.
			for _, y := range args[2:] {
				if err := r.precheck(op, v, y); err != nil {
					return nil, err
				}
				if v, err = starlark.Binary(op, v, y); err != nil {
					return nil, err
				}
				if err := r.charge(v); err != nil {
					return nil, err
				}
			}
			return v, nil
		})
	}
	rangeFn := starlark.Universe["range"].(*starlark.Builtin)
	return map[string]*starlark.Builtin{
		"_add":   bin("+", syntax.PLUS, false),
		"_mul":   bin("*", syntax.STAR, false),
		"_mod":   bin("%", syntax.PERCENT, false),
		"_addeq": bin("+=", syntax.PLUS, true),
		"_muleq": bin("*=", syntax.STAR, true),
		"range": starlark.NewBuiltin("range", func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			v, err := starlark.Call(th, rangeFn, args, kw)
			if err != nil {
				return nil, err
			}
			if n := v.(starlark.Sequence).Len(); n > r.st.b.Sandbox.MaxLen {
				return nil, fmt.Errorf("range of %d elements: more than %d (sandbox.max_len)", n, r.st.b.Sandbox.MaxLen)
			}
			return v, nil
		}),
		"_call": starlark.NewBuiltin("call", func(th *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			recv, name := args[0], string(args[1].(starlark.String))
			m, err := getattr(recv, name)
			if err != nil {
				return nil, err
			}
			rest := args[2:]
			if err := r.precall(recv, name, rest); err != nil {
				return nil, err
			}
			v, err := starlark.Call(th, m, rest, kw)
			if err != nil {
				return nil, err
			}
			return v, r.charge(v)
		}),
	}
}

func getattr(x starlark.Value, name string) (starlark.Value, error) {
	h, ok := x.(starlark.HasAttrs)
	if !ok {
		return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
	}
	v, err := h.Attr(name)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, starlark.NoSuchAttrError(fmt.Sprintf("%s has no .%s field or method", x.Type(), name))
	}
	return v, nil
}

// size is a value's length in elements or bytes (0 for scalars).
func size(v starlark.Value) int {
	switch v := v.(type) {
	case starlark.String:
		return len(v)
	case starlark.Bytes:
		return len(v)
	case starlark.Sequence:
		return v.Len()
	case starlark.IterableMapping:
		return len(v.Items())
	}
	return 0
}

// intBits bounds an integer's size (× squares its bits).
func intBits(v starlark.Value) int {
	if i, ok := v.(starlark.Int); ok {
		if _, ok := i.Int64(); ok {
			return 64
		}
		return i.BigInt().BitLen()
	}
	return 0
}

func (r *starRT) tooLong(n int) error {
	if n > r.st.b.Sandbox.MaxLen {
		return fmt.Errorf("value of %d elements or bytes: more than %d (sandbox.max_len)", n, r.st.b.Sandbox.MaxLen)
	}
	return nil
}

// precheck refuses, before computing it, a + or * whose result would be
// too long (or an integer too large).
func (r *starRT) precheck(op syntax.Token, x, y starlark.Value) error {
	switch op {
	case syntax.PLUS:
		return r.tooLong(size(x) + size(y))
	case syntax.STAR:
		if bx, by := intBits(x), intBits(y); bx > 0 && by > 0 {
			if bx+by > 4096 {
				return errors.New("integer of more than 4096 bits (sandbox)")
			}
			return nil
		}
		seq, n := x, y
		if _, ok := x.(starlark.Int); ok {
			seq, n = y, x
		}
		if k, ok := n.(starlark.Int); ok {
			c, ok := k.Int64()
			if !ok || c > int64(r.st.b.Sandbox.MaxLen) {
				return r.tooLong(r.st.b.Sandbox.MaxLen + 1)
			}
			hi, lo := bits.Mul64(uint64(max(c, 0)), uint64(size(seq)))
			if hi != 0 || lo > uint64(r.st.b.Sandbox.MaxLen) {
				return r.tooLong(r.st.b.Sandbox.MaxLen + 1)
			}
		}
	case syntax.PERCENT:
		return r.tooLong(size(x) + 16*max(size(y), 1))
	}
	return nil
}

// precall checks the growing methods before running them.
func (r *starRT) precall(recv starlark.Value, name string, args starlark.Tuple) error {
	switch name {
	case "join":
		if len(args) == 1 {
			if it, ok := args[0].(starlark.Iterable); ok {
				n := 0
				iter := it.Iterate()
				defer iter.Done()
				var x starlark.Value
				for k := 0; iter.Next(&x); k++ {
					n += size(x) + size(recv)
					if err := r.tooLong(n); err != nil {
						return err
					}
				}
			}
		}
	case "replace":
		if s, ok := recv.(starlark.String); ok && len(args) >= 2 {
			old, _ := args[0].(starlark.String)
			nw, _ := args[1].(starlark.String)
			cnt := strings.Count(string(s), string(old))
			return r.tooLong(len(s) + cnt*len(nw))
		}
	case "extend":
		return r.tooLong(size(recv) + size(args[0]))
	}
	return nil
}

// charge counts what a checked operation allocated in this call.
func (r *starRT) charge(v starlark.Value) error {
	r.alloc += size(v)
	if r.alloc > maxAllocPerCall {
		return fmt.Errorf("more than %d elements or bytes allocated in one call (sandbox)", maxAllocPerCall)
	}
	return nil
}

// rewriteFile compiles the source's growing operations to the checked
// builtins: x+y → _add(x, y), x*y → _mul(x, y), x%y → _mod(x, y),
// x += y → x += _addeq(x, y), x *= y → x *= _muleq(x, y),
// x.join(…)/x.replace(…)/x.extend(…) → _call(x, "join", …).
func rewriteFile(f *syntax.File) {
	for _, s := range f.Stmts {
		rwStmt(s)
	}
}

func rwStmts(ss []syntax.Stmt) {
	for _, s := range ss {
		rwStmt(s)
	}
}

func rwStmt(s syntax.Stmt) {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		s.LHS = rw(s.LHS)
		s.RHS = rw(s.RHS)
		switch s.Op {
		case syntax.PLUS_EQ:
			s.RHS = call("_addeq", s.OpPos, s.LHS, s.RHS)
		case syntax.STAR_EQ:
			s.RHS = call("_muleq", s.OpPos, s.LHS, s.RHS)
		}
	case *syntax.DefStmt:
		for i, p := range s.Params {
			s.Params[i] = rw(p)
		}
		rwStmts(s.Body)
	case *syntax.ExprStmt:
		s.X = rw(s.X)
	case *syntax.ForStmt:
		s.X = rw(s.X)
		rwStmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = rw(s.Cond)
		rwStmts(s.Body)
	case *syntax.IfStmt:
		s.Cond = rw(s.Cond)
		rwStmts(s.True)
		rwStmts(s.False)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = rw(s.Result)
		}
	}
}

func call(name string, pos syntax.Position, args ...syntax.Expr) syntax.Expr {
	return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: pos, Name: name}, Lparen: pos, Args: args, Rparen: pos}
}

func isIdent(x syntax.Expr, name string) bool {
	id, ok := x.(*syntax.Ident)
	return ok && id.Name == name
}

func rwList(xs []syntax.Expr) {
	for i, x := range xs {
		xs[i] = rw(x)
	}
}

func rw(x syntax.Expr) syntax.Expr {
	switch x := x.(type) {
	case nil:
		return nil
	case *syntax.BinaryExpr:
		x.X, x.Y = rw(x.X), rw(x.Y)
		switch x.Op {
		case syntax.PLUS:
			if c, ok := x.X.(*syntax.CallExpr); ok && isIdent(c.Fn, "_add") {
				c.Args = append(c.Args, x.Y) // a + b + c → _add(a, b, c)
				return c
			}
			return call("_add", x.OpPos, x.X, x.Y)
		case syntax.STAR:
			return call("_mul", x.OpPos, x.X, x.Y)
		case syntax.PERCENT:
			return call("_mod", x.OpPos, x.X, x.Y)
		}
	case *syntax.CallExpr:
		x.Fn = rw(x.Fn)
		rwList(x.Args)
		if d, ok := x.Fn.(*syntax.DotExpr); ok {
			switch d.Name.Name {
			case "join", "replace", "extend":
				lit := &syntax.Literal{Token: syntax.STRING, TokenPos: d.Dot, Raw: `"` + d.Name.Name + `"`, Value: d.Name.Name}
				return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: d.Dot, Name: "_call"}, Lparen: x.Lparen,
					Args: append([]syntax.Expr{d.X, lit}, x.Args...), Rparen: x.Rparen}
			}
		}
	case *syntax.Comprehension:
		x.Body = rw(x.Body)
		for _, c := range x.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.X = rw(c.X)
			case *syntax.IfClause:
				c.Cond = rw(c.Cond)
			}
		}
	case *syntax.CondExpr:
		x.Cond, x.True, x.False = rw(x.Cond), rw(x.True), rw(x.False)
	case *syntax.DictEntry:
		x.Key, x.Value = rw(x.Key), rw(x.Value)
	case *syntax.DictExpr:
		rwList(x.List)
	case *syntax.DotExpr:
		x.X = rw(x.X)
	case *syntax.IndexExpr:
		x.X, x.Y = rw(x.X), rw(x.Y)
	case *syntax.LambdaExpr:
		rwList(x.Params)
		x.Body = rw(x.Body)
	case *syntax.ListExpr:
		rwList(x.List)
	case *syntax.ParenExpr:
		x.X = rw(x.X)
	case *syntax.SliceExpr:
		x.X, x.Lo, x.Hi, x.Step = rw(x.X), rw(x.Lo), rw(x.Hi), rw(x.Step)
	case *syntax.TupleExpr:
		rwList(x.List)
	case *syntax.UnaryExpr:
		x.X = rw(x.X)
	}
	return x
}

// randomValue is a stage's seeded stream: random.int(n) in [0, n),
// random.float() in [0, 1).
type randomValue struct {
	src     *rand.PCG // its state is copied into a fork's stream
	r       *rand.Rand
	intFn   *starlark.Builtin
	floatFn *starlark.Builtin
}

func newRandom(src *rand.PCG) *randomValue {
	v := &randomValue{src: src, r: rand.New(src)}
	v.intFn = starlark.NewBuiltin("int", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var n int
		if err := starlark.UnpackPositionalArgs("random.int", args, kw, 1, &n); err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, fmt.Errorf("random.int: expected n > 0, found %d", n)
		}
		return starlark.MakeInt(v.r.IntN(n)), nil
	})
	v.floatFn = starlark.NewBuiltin("float", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs("random.float", args, kw, 0); err != nil {
			return nil, err
		}
		return starlark.Float(v.r.Float64()), nil
	})
	return v
}

func (v *randomValue) String() string        { return "<random>" }
func (v *randomValue) Type() string          { return "random" }
func (v *randomValue) Freeze()               {}
func (v *randomValue) Truth() starlark.Bool  { return true }
func (v *randomValue) Hash() (uint32, error) { return 0, errors.New("unhashable: random") }
func (v *randomValue) AttrNames() []string   { return []string{"float", "int"} }
func (v *randomValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "int":
		return v.intFn, nil
	case "float":
		return v.floatFn, nil
	}
	return nil, nil
}
