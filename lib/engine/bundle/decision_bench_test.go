package bundle

import (
	"fmt"
	"os"
	"testing"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/row"
)

// BenchmarkDecision is the cost of one routing decision over 8 replicas:
// the built-in least-loaded (scanning, as when scores are kept), the
// examples' Starlark least-loaded and a score tree.
func BenchmarkDecision(b *testing.B) {
	ids, deps, roles := make([]string, 8), make([]string, 8), make([]string, 8)
	for i := range ids {
		ids[i], deps[i], roles[i] = fmt.Sprint("d/", i), "d", "monolithic"
	}
	board := policy.NewBoard(ids, deps, roles, -1)
	for i := range ids {
		board.Set(i, policy.ReplicaStatus{Waiting: (i * 7) % 5, Running: 10 + i%3, KVUsed: int64(100 * i), KVTotal: 1000})
	}
	req := row.NewRequest("r1")
	req.InputTokens, req.OutputTokens = 500, 100
	src, err := os.ReadFile("../../../examples/policies/least-loaded.star")
	if err != nil {
		b.Fatal(err)
	}
	env := Env{ReadFile: func(string) ([]byte, error) { return src, nil }}
	for _, bc := range []struct{ name, yml string }{
		{"builtin", ""},
		{"starlark", "routing: {kind: starlark, file: x.star}\n"},
		{"tree", "routing: {kind: decision_tree, tree: {score: \"0 - replica.outstanding\"}}\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var r policy.Routing
			if bc.yml == "" {
				r, _ = policy.NewRouting("least-loaded", nil, policy.Env{})
			} else {
				bd, err := Parse("b.yaml", []byte(bc.yml), env)
				if err != nil {
					b.Fatal(err)
				}
				st := bd.Stage(StageRouting)
				if st.Kind == KindStarlark {
					sr, err := st.star.instantiate(&Runtime{b: bd}, 1)
					if err != nil {
						b.Fatal(err)
					}
					r = &starRouting{r: sr}
				} else {
					r = &treeRouting{st: st}
				}
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				v := board.View(int64(i), nil, true)
				d := r.Route(policy.NewRequestView(&req, int64(i), nil), v)
				if d.Target != 0 {
					b.Fatalf("target %d", d.Target)
				}
			}
		})
	}
}
