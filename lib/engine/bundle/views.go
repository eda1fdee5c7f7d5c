package bundle

import (
	"errors"
	"fmt"

	"go.starlark.net/starlark"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
)

// Starlark's views of the engine: read-only values over the same field
// tables the decision trees use, reused from call to call (a view is only
// valid during the call it was passed to; the state dict refuses them).

func fieldValue(f *field, c *evalCtx) starlark.Value {
	switch f.k {
	case kInt:
		return starlark.MakeInt64(f.i(c))
	case kFloat:
		return starlark.Float(f.f(c))
	case kString:
		return starlark.String(f.s(c))
	default:
		return starlark.Bool(f.b(c))
	}
}

type frozen struct{}

func (frozen) Freeze()              {}
func (frozen) Truth() starlark.Bool { return true }

// reqValue is the request being decided (st == nil), or a waiting or
// running request of a scheduler or preemption call.
type reqValue struct {
	frozen
	r   *starRT
	st  *request.State
	now int64
}

func (v *reqValue) String() string {
	if v.st != nil {
		return "<request " + v.st.Req.ID + ">"
	}
	return "<request " + v.r.ctx.rv.ID() + ">"
}
func (v *reqValue) Type() string { return "request" }
func (v *reqValue) Hash() (uint32, error) {
	return 0, errors.New("unhashable: request (use request.id)")
}
func (v *reqValue) AttrNames() []string {
	if v.st != nil {
		return schedRequestTable.names()
	}
	return requestTable.names()
}

func (v *reqValue) Attr(name string) (starlark.Value, error) {
	if v.st == nil {
		f := requestTable[name]
		if f == nil {
			return nil, nil
		}
		if name == "output_tokens" {
			return outputValue(&v.r.ctx), nil
		}
		return fieldValue(f, &v.r.ctx), nil
	}
	f := schedRequestTable[name]
	if f == nil {
		return nil, nil
	}
	c := evalCtx{rv: policy.NewRequestView(&v.st.Req, v.now, nil), st: v.st, ob: v.r.rt.ob}
	if name == "output_tokens" {
		return outputValue(&c), nil
	}
	return fieldValue(f, &c), nil
}

// outputValue is request.output_tokens in Starlark: the prediction (or, with
// oracle: true, the true length), None when unknown.
func outputValue(c *evalCtx) starlark.Value {
	if n, ok := c.ob.output(c.rv); ok {
		return starlark.MakeInt64(n)
	}
	return starlark.None
}

// boardVals are the replica views of one candidate group.
type boardVals struct {
	cv    *policy.ClusterView
	vals  []replicaValue
	tuple starlark.Tuple
	ids   map[string]int
}

func (r *starRT) board(cv *policy.ClusterView) *boardVals {
	bv := r.boards[cv]
	if bv != nil && len(bv.vals) == cv.Len() {
		return bv
	}
	bv = &boardVals{cv: cv, vals: make([]replicaValue, cv.Len()), tuple: make(starlark.Tuple, cv.Len()), ids: map[string]int{}}
	for i := range bv.vals {
		bv.vals[i] = replicaValue{r: r, bv: bv, i: i}
		bv.tuple[i] = &bv.vals[i]
		bv.ids[cv.Replica(i).ID()] = i
	}
	r.boards[cv] = bv
	return bv
}

// replicaValue is candidate i.
type replicaValue struct {
	frozen
	r  *starRT
	bv *boardVals
	i  int
	cb *starlark.Builtin
}

func (v *replicaValue) String() string { return "<replica " + v.bv.cv.Replica(v.i).ID() + ">" }
func (v *replicaValue) Type() string   { return "replica" }
func (v *replicaValue) Hash() (uint32, error) {
	return 0, errors.New("unhashable: replica (use replica.id)")
}
func (v *replicaValue) AttrNames() []string {
	return append(replicaTable.names(), "kv_tiers")
}

func (v *replicaValue) Attr(name string) (starlark.Value, error) {
	if v.r.ctx.cv != v.bv.cv {
		return nil, errors.New("a replica view used outside the call it was given to")
	}
	if name == "cached_blocks" {
		if v.cb == nil {
			v.cb = starlark.NewBuiltin("cached_blocks", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
				if len(args) != 1 || len(kw) != 0 {
					return nil, errors.New("cached_blocks(request): expected one argument, the request")
				}
				if args[0] != starlark.Value(&v.r.reqv) {
					return nil, fmt.Errorf("cached_blocks(request): expected the request being decided, found a %s", args[0].Type())
				}
				return starlark.MakeInt(v.r.ctx.cv.CachedBlocks(v.i)), nil
			})
		}
		return v.cb, nil
	}
	if name == "kv_tiers" {
		ts := v.bv.cv.Replica(v.i).Tiers()
		out := make(starlark.Tuple, len(ts))
		for k := range ts {
			t := ts[k] // a copy: the value outlives nothing, but the board may change after the call
			out[k] = &viewValue{r: v.r, typ: "tier", t: tierTable, c: &evalCtx{tier: &t}}
		}
		return out, nil
	}
	f := replicaTable[name]
	if f == nil {
		return nil, nil
	}
	c := &v.r.ctx
	c.i = v.i
	return fieldValue(f, c), nil
}

// clusterValue is the cluster as the router sees it for this request.
type clusterValue struct {
	frozen
	r *starRT
}

func (v *clusterValue) String() string        { return "<cluster>" }
func (v *clusterValue) Type() string          { return "cluster" }
func (v *clusterValue) Hash() (uint32, error) { return 0, errors.New("unhashable: cluster") }
func (v *clusterValue) AttrNames() []string {
	return append([]string{"replicas", "router", "tenant"}, clusterTable.names()...)
}

func (v *clusterValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "replicas":
		return v.r.board(v.r.ctx.cv).tuple, nil
	case "tenant":
		return &v.r.tenv, nil
	case "router":
		return &v.r.rouv, nil
	}
	f := clusterTable[name]
	if f == nil {
		return nil, nil
	}
	return fieldValue(f, &v.r.ctx), nil
}

// viewValue is a flat view over a field table (tenant, router, pool,
// replica of a scheduler call).
type viewValue struct {
	frozen
	r   *starRT
	typ string
	t   fieldTable
	c   *evalCtx // nil: the call's context
}

func (v *viewValue) String() string        { return "<" + v.typ + ">" }
func (v *viewValue) Type() string          { return v.typ }
func (v *viewValue) Hash() (uint32, error) { return 0, errors.New("unhashable: " + v.typ) }
func (v *viewValue) AttrNames() []string   { return v.t.names() }

func (v *viewValue) Attr(name string) (starlark.Value, error) {
	f := v.t[name]
	if f == nil {
		return nil, nil
	}
	c := v.c
	if c == nil {
		c = &v.r.ctx
	}
	return fieldValue(f, c), nil
}

// attrsValue is a small fixed record (a scheduler's replica).
type attrsValue struct {
	frozen
	typ   string
	names []string
	vals  []starlark.Value
}

func (v *attrsValue) String() string        { return "<" + v.typ + ">" }
func (v *attrsValue) Type() string          { return v.typ }
func (v *attrsValue) Hash() (uint32, error) { return 0, errors.New("unhashable: " + v.typ) }
func (v *attrsValue) AttrNames() []string   { return v.names }
func (v *attrsValue) Attr(name string) (starlark.Value, error) {
	for i, n := range v.names {
		if n == name {
			return v.vals[i], nil
		}
	}
	return nil, nil
}
