package synth

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// Adding a workload feature must not change the rows of a spec that does
// not use it: every built-in example and the benchmark spec (its first
// 20,000 rows) hash, over the columns that existed before issue 19, to the
// digests recorded before that work (testdata/compat.golden).
func TestExistingSpecsUnchanged(t *testing.T) {
	var lines []string
	specs := map[string]string{"bench": benchSpec}
	names := []string{"bench"}
	for _, n := range []string{"chat-multiturn", "closed-loop", "fork-join-research", "mixed-tenants", "multi-step-chain", "react", "tree-of-thought"} {
		src, _ := ExampleSource(n)
		specs[n] = string(src)
		names = append(names, n)
	}
	for _, n := range names {
		s, err := Parse([]byte(specs[n]), n, ".")
		if err != nil {
			t.Fatal(err)
		}
		s.NumRequests = 20000
		h := sha256.New()
		_, err = Generate(s, func(r *trace.Request) error {
			fmt.Fprintf(h, "%s|%d|%v|%d|%s|%d|%d|%v|%s|%s|%s|%s|%d|%s|%d|%v|%d\n", r.ID, r.ArrivalUS, r.DependsOn, r.DelayUS, r.Kind,
				r.InputTokens, r.OutputTokens, r.PrefixHashes, r.SessionID, r.TenantID, r.SLOClass, r.Model, r.Priority,
				r.StepID, r.LoopIteration, r.Streaming, r.TimeoutUS)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %x", n, h.Sum(nil)))
	}
	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "compat.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("rows of existing specs changed:\n got %s\nwant %s", got, want)
	}
}
