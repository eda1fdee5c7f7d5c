package trace

import "testing"

func TestResolveVersion(t *testing.T) {
	for _, tc := range []struct{ ldVersion, ldCommit, want string }{
		{"1.2.3", "abc", "1.2.3"},
		{"", "696e05b713bd-dirty", BaseVersion + "+696e05b713bd-dirty"},
		{"", "", BaseVersion}, // go test: no vcs settings, Main.Version (devel)
	} {
		if got := resolveVersion(tc.ldVersion, tc.ldCommit); got != tc.want {
			t.Errorf("resolveVersion(%q, %q) = %q, want %q", tc.ldVersion, tc.ldCommit, got, tc.want)
		}
	}
}
