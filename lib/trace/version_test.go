package trace

import (
	"runtime/debug"
	"testing"
)

// TestResolveVersion: one version string per commit, however the binary
// was built (issue 32, item 12: go build said v0.0.0-2026…-bcef673d1e08,
// make build 0.1.0+bcef673d1e08).
func TestResolveVersion(t *testing.T) {
	rev := "5b7b537c147d1c1c0ab7d2f3c6fd2d1a9e0b7f42"
	vcs := func(mainVersion string, modified bool) *debug.BuildInfo {
		m := "false"
		if modified {
			m = "true"
		}
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/blis-sim/blis", Version: mainVersion},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: m}}}
	}
	devel := &debug.BuildInfo{Main: debug.Module{Path: "github.com/blis-sim/blis", Version: "(devel)"}}
	for _, tc := range []struct {
		name                string
		ldVersion, ldCommit string
		bi                  *debug.BuildInfo
		want                string
	}{
		{"link-time version", "1.2.3", "abc", vcs("v0.0.0-20260101120000-5b7b537c147d", false), "1.2.3"},
		{"make build, -buildvcs=false", "", "5b7b537c147d", devel, BaseVersion + "+5b7b537c147d"},
		{"make build, dirty", "", "5b7b537c147d-dirty", devel, BaseVersion + "+5b7b537c147d-dirty"},
		{"go build: a pseudo-version", "", "", vcs("v0.0.0-20260101120000-5b7b537c147d", false), BaseVersion + "+5b7b537c147d"},
		{"go build: a dirty pseudo-version", "", "", vcs("v0.0.0-20260101120000-5b7b537c147d+dirty", true), BaseVersion + "+5b7b537c147d-dirty"},
		{"go build after a tag", "", "", vcs("v0.1.1-0.20260101120000-5b7b537c147d", false), BaseVersion + "+5b7b537c147d"},
		{"make build with vcs stamping", "", "5b7b537c147d", vcs("v0.0.0-20260101120000-5b7b537c147d", false), BaseVersion + "+5b7b537c147d"},
		{"go build, Go before 1.24: (devel)", "", "", vcs("(devel)", true), BaseVersion + "+5b7b537c147d-dirty"},
		{"go install at a tag", "", "", vcs("v0.2.0", false), "v0.2.0"},
		{"go test: nothing", "", "", devel, BaseVersion},
		{"no build info", "", "", nil, BaseVersion},
	} {
		if got := resolveVersion(tc.ldVersion, tc.ldCommit, tc.bi); got != tc.want {
			t.Errorf("%s: resolveVersion(%q, %q) = %q, want %q", tc.name, tc.ldVersion, tc.ldCommit, got, tc.want)
		}
	}
}
