package decision

import (
	"strings"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// TestRegretWarning: a run that asked for regret and replayed nothing says
// why (issue 32, item 2).
func TestRegretWarning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sample float64
		st     Stats
		want   string
	}{
		{"not asked", 0, Stats{}, ""},
		{"replayed", 0.1, Stats{RegretSamples: 5, RegretSampled: 5}, ""},
		{"one replica", 0.01, Stats{RegretSampled: 93, RegretNoAlternative: 93},
			"--regret-sample 0.01 replayed no routing decision: each of the 93 sampled had no other candidate replica"},
		{"too small a sample", 0.0001, Stats{ByKind: map[string]int64{trace.DecisionRouting: 400}},
			"--regret-sample 0.0001 replayed no routing decision: none of the 400 was sampled"},
		{"some alone, the rest failed", 0.5, Stats{RegretSampled: 4, RegretNoAlternative: 1},
			"--regret-sample 0.5 replayed none of the 4 routing decisions sampled (1 had no other candidate replica)"},
	} {
		got := tc.st.RegretWarning(tc.sample)
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q…", tc.name, got, tc.want)
		}
	}
}
