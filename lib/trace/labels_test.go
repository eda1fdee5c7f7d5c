package trace

import "testing"

// TestPolicyAndRouterLabels: what blis-sim's summary and blis-report's Run
// configuration say routed a run (issue 32, item 1).
func TestPolicyAndRouterLabels(t *testing.T) {
	for _, tc := range []struct {
		name           string
		kv             map[string]string
		router, policy string
	}{
		{"no bundle", map[string]string{MetaSimRouter: "least-kv"}, "least-kv", ""},
		{"nothing recorded", nil, "", ""},
		{"a bundle that routes", map[string]string{MetaSimRouter: "round-robin", MetaPolicyID: "prefix-load", MetaPolicyGeneration: "2",
			MetaPolicyStages: "routing starlark prefix-load.star"},
			"policy prefix-load: starlark prefix-load.star", "prefix-load generation 2: routing starlark prefix-load.star"},
		{"a bundle that does not route", map[string]string{MetaSimRouter: "weighted", MetaPolicyID: "adm", MetaPolicyGeneration: "0",
			MetaPolicyStages: "admission queue-limit; priority decision tree"},
			"weighted", "adm generation 0: admission queue-limit; priority decision tree"},
		{"a template routing stage, no id", map[string]string{MetaSimRouter: "round-robin", MetaPolicyGeneration: "0",
			MetaPolicyStages: "admission queue-limit; routing weighted"},
			"policy (no id): weighted", "(no id) generation 0: admission queue-limit; routing weighted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMeta()
			for k, v := range tc.kv {
				m.Set(k, v)
			}
			if got := m.RouterLabel(); got != tc.router {
				t.Errorf("RouterLabel = %q, want %q", got, tc.router)
			}
			if got := m.PolicyLabel(); got != tc.policy {
				t.Errorf("PolicyLabel = %q, want %q", got, tc.policy)
			}
		})
	}
}
