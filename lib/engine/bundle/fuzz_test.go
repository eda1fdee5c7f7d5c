package bundle

import (
	"regexp"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/row"
)

// FuzzLoad: the bundle loader never panics, and what it accepts applies.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"id: x\ngeneration: 3\nparent_id: y\nmutations: [a, b]\n",
		"routing: {kind: starlark, file: r.star}\n",
		"routing: {kind: starlark, source: \"def route(request, cluster):\\n    return cluster.replicas[0].id\\n\"}\n",
		"admission: {kind: parameterized, template: queue-limit, params: {limit: 500}}\n",
		"routing: {kind: parameterized, template: weighted, params: {prefix: 0.7, load: 0.2, kv: 0.1}}\n",
		"priority: {kind: decision_tree, tree: {if: \"request.slo_class == 'interactive'\", then: {priority: 10}, else: {priority: 0}}}\n",
		"routing: {kind: decision_tree, tree: {if: \"request.input_tokens > 4096\", then: {score: \"0 - replica.outstanding\"}, else: {score: \"replica.kv_free_blocks\"}}}\n",
		"admission: {kind: decision_tree, tree: {if: \"tenant.recent_rate > 20 and not tenant.burst_detected\", then: {admit: delay, delay_us: 5}, else: {admit: reject, reason: x}}}\n",
		"scheduler: {kind: parameterized, template: shortest-first}\npreemption: {kind: decision_tree, tree: {score: \"request.generated_tokens\"}}\n",
		"autoscaler: {kind: decision_tree, tree: {if: \"pool.outstanding > 10\", then: {delta: 1}, else: {replicas: 2}}}\n",
		"sandbox: {max_steps: 10, max_len: 5, max_state: 3, max_run_steps: 100}\n",
		"oracle: true\npredictor: {kind: noisy, error: 0.5}\npriority: {kind: decision_tree, tree: {priority: \"request.output_tokens * 0.5\"}}\n",
		"predictor: {kind: class, prior: 64}\nscheduler: {kind: decision_tree, tree: {score: \"0 - request.output_tokens\"}}\n",
		"autoscaler: {kind: decision_tree, tree: {if: \"pool.slo_attainment < 0.9 and pool.since_last_scale_us > 60000000\", then: {delta: 1}, else: {delta: 0}}}\n",
		"routing: {kind: decision_tree, tree: {if: \"cluster.queued + cluster.held >= 4\", then: {wait_us: 5000, reason: busy}, else: {route: least-loaded}}}\n",
		"routing: {kind: parameterized, template: least-loaded-hold, params: {queue: 2, wait_us: 500}}\n",
		"routing: {kind: starlark, source: \"def route(request, cluster):\\n    if cluster.held > 2:\\n        return {\\\"wait\\\": 1000, \\\"reason\\\": \\\"x\\\"}\\n    return (\\\"wait\\\", 10)\\n\"}\n",
	} {
		f.Add([]byte(s), []byte("def route(request, cluster):\n    return cluster.replicas[0].id\n"))
	}
	f.Fuzz(func(t *testing.T, yml, star []byte) {
		env := Env{ReadFile: func(string) ([]byte, error) { return star, nil }}
		b, err := Parse("fuzz.yaml", yml, env)
		if err != nil {
			return
		}
		for _, name := range StageNames {
			if st := b.Stage(name); st != nil && st.Kind == KindStarlark && st.MaxSteps > 1e6 {
				return // running it may take long; loading was the test
			}
		}
		b.Provenance()
	})
}

var longNumber = regexp.MustCompile(`[0-9]{7,}|[eE][0-9]`)

// FuzzTreeEval: a condition either fails to compile with an error or
// evaluates without panicking, and agrees with Starlark's own evaluation
// of the same expression over the same fields.
func FuzzTreeEval(f *testing.F) {
	for _, s := range []string{
		"request.input_tokens > 4096",
		"request.slo_class == 'interactive' and request.priority >= 2",
		"not (request.output_tokens < 10 or request.tenant_id != 'a')",
		"request.input_tokens / request.output_tokens > 1.5",
		"request.arrival_us - request.now_us <= -3",
		"request.model == \"llama\"",
		"-request.priority * 2 + 1 != 0.5",
	} {
		f.Add(s, int32(5000), int32(7), "interactive", int32(3))
	}
	f.Fuzz(func(t *testing.T, src string, in, out int32, slo string, prio int32) {
		c := &exprCompiler{roots: stageRoots(StagePriority, false), used: map[string]bool{}}
		e, err := c.compile(src)
		if err != nil {
			return
		}
		r := row.NewRequest("q1")
		r.InputTokens, r.OutputTokens, r.SLOClass, r.Priority, r.ArrivalUS, r.TenantID, r.Model = in, out, slo, prio, 1000, "a", "llama"
		ctx := &evalCtx{rv: policy.NewRequestView(&r, 2000, nil)}
		var got starlark.Value
		switch e.k {
		case kBool:
			got = starlark.Bool(e.b(ctx))
		case kInt:
			got = starlark.MakeInt64(e.i(ctx))
		case kFloat:
			got = starlark.Float(e.f(ctx))
		case kString:
			got = starlark.String(e.s(ctx))
		}
		if longNumber.MatchString(src) {
			return // int64 wrap-around vs Starlark's big ints
		}
		fields := starlark.StringDict{}
		for _, fd := range requestFields {
			fields[fd.name] = fieldValue(&fd, ctx)
		}
		env := starlark.StringDict{"request": starlarkstruct.FromStringDict(starlarkstruct.Default, fields),
			"true": starlark.True, "false": starlark.False}
		want, err := starlark.EvalOptions(&syntax.FileOptions{}, &starlark.Thread{}, "x", src, env)
		if err != nil {
			return // e.g. Starlark refuses float division by zero
		}
		if f1, ok := starlark.AsFloat(want); ok {
			if f2, ok := starlark.AsFloat(got); ok && (f1 == f2 || f1 != f1 && f2 != f2) {
				return
			}
		}
		if eq, err := starlark.Equal(want, got); err != nil || !eq {
			t.Fatalf("%q: tree evaluator %v, Starlark %v", src, got, want)
		}
	})
}
