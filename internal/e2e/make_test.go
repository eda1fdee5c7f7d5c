package e2e

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

var scriptRef = regexp.MustCompile(`(?:bench|scripts)/[A-Za-z0-9_./-]+\.sh`)

// TestMakefileScriptsExist: every script the Makefile, bench/run.sh and the
// README call exists and is executable (make bench called a missing
// bench/run.sh; issue 10, item 13).
func TestMakefileScriptsExist(t *testing.T) {
	root := repoRoot()
	for _, f := range []string{"Makefile", "bench/run.sh", "README.md"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range scriptRef.FindAllString(string(b), -1) {
			fi, err := os.Stat(filepath.Join(root, s))
			if err != nil {
				t.Errorf("%s calls %s: %v", f, s, err)
				continue
			}
			if fi.Mode()&0o111 == 0 {
				t.Errorf("%s calls %s, which is not executable", f, s)
			}
		}
	}
	mk, _ := os.ReadFile(filepath.Join(root, "Makefile"))
	for _, want := range []string{"bench/run.sh", "scripts/browser-tests.sh", "scripts/shared-data-tests.sh"} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("Makefile does not call %s", want)
		}
	}
}

// TestBrowserSkipIsSaid: without chromium on the PATH, the browser step of
// make test says that it skipped the browser tests (the README promises it;
// `go test ./...` printed "ok").
func TestBrowserSkipIsSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	bin := t.TempDir()
	tools := map[string]string{"go": filepath.Join(runtime.GOROOT(), "bin", "go")}
	for _, n := range []string{"bash", "grep", "sed", "dirname", "gcc", "cc", "ld", "as"} {
		if p, err := exec.LookPath(n); err == nil {
			tools[n] = p
		}
	}
	for n, p := range tools {
		if err := os.Symlink(p, filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "bash"), filepath.Join(repoRoot(), "scripts", "browser-tests.sh"))
	cmd.Env = append(os.Environ(), "PATH="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/browser-tests.sh: %v\n%s", err, out)
	}
	// Every browser test skips, and the script says so, whatever their number.
	m := regexp.MustCompile(`browser tests: SKIPPED (\d+) of (\d+): chromium is not installed`).FindStringSubmatch(string(out))
	if m == nil || m[1] != m[2] || !strings.Contains(string(out), "chromium not installed") {
		t.Fatalf("the skip is not said:\n%s", out)
	}
}

// TestShellScriptsParse: every shell script of the repository parses
// (bash -n). The bench scripts run only by hand or under bench/run.sh, so a
// merge that dropped a `fi` from bench/sim.sh went unnoticed until then.
func TestShellScriptsParse(t *testing.T) {
	root := repoRoot()
	scripts, _ := filepath.Glob(filepath.Join(root, "bench", "*.sh"))
	more, _ := filepath.Glob(filepath.Join(root, "scripts", "*.sh"))
	scripts = append(append(scripts, more...), filepath.Join(root, ".ci", "run"))
	if len(scripts) < 5 {
		t.Fatalf("found only %d scripts under bench/, scripts/ and .ci/", len(scripts))
	}
	for _, s := range scripts {
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", s, err, out)
		}
	}
}

// TestPGOProfile: make build optimises with the profile it names, and that
// profile is there and readable (a missing or truncated one fails go build:
// make demo, the README's first command, would fail with it).
func TestPGOProfile(t *testing.T) {
	root := repoRoot()
	mk := exec.Command("make", "-n", "build")
	mk.Dir = root
	out, err := mk.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	m := regexp.MustCompile(`go build -pgo=(\S+) `).FindSubmatch(out)
	if m == nil {
		t.Fatalf("make -n build passes no -pgo profile:\n%s", out)
	}
	if string(m[1]) != "cmd/default.pgo" {
		t.Fatalf("make build uses profile %q, want cmd/default.pgo (scripts/regen-pgo.sh writes it)", m[1])
	}
	f, err := os.Open(filepath.Join(root, string(m[1])))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f) // a pprof profile is a gzipped protocol buffer
	if err != nil {
		t.Fatalf("%s is not a pprof profile: %v", m[1], err)
	}
	n, err := io.Copy(io.Discard, z)
	if err != nil || n < 1000 {
		t.Fatalf("%s: %d bytes of profile (%v): truncated?", m[1], n, err)
	}
}

// TestOneVersionPerCommit: make build (link-time commit) and go build (Go's
// VCS stamping) give the same --version, the commit's first 12 digits with
// -dirty exactly when git status lists anything (issue 32, item 12: go
// build said v0.0.0-2026…-bcef673d1e08, make build 0.1.0+bcef673d1e08,
// and the README's own outputs made the tree dirty for one of them only).
func TestOneVersionPerCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds blis-sim")
	}
	root := repoRoot()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("not a git checkout (git %s: %v)", strings.Join(args, " "), err)
		}
		return string(out)
	}
	want := strings.TrimSpace(git("rev-parse", "HEAD"))[:12]
	if strings.TrimSpace(git("status", "--porcelain")) != "" {
		want += "-dirty"
	}
	mk := exec.Command("make", "-n", "build")
	mk.Dir = root
	out, err := mk.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	m := regexp.MustCompile(`lib/trace\.commit=(\S*?)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("make -n build sets no lib/trace.commit:\n%s", out)
	}
	if string(m[1]) != want {
		t.Errorf("make build stamps commit %q, want %q (the revision, -dirty as git status says)", m[1], want)
	}
	exe := filepath.Join(t.TempDir(), "blis-sim")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", exe, "./cmd/blis-sim")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if bi, err := exec.Command("go", "version", "-m", exe).Output(); err != nil || !strings.Contains(string(bi), "vcs.revision=") {
		t.Logf("go build stamped no VCS information here (a git worktree, whose .git is a file): only make build's commit is checked; lib/trace's TestResolveVersion covers the stamped case")
		return
	}
	v, err := exec.Command(exe, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(v)); got != "blis-sim version 0.1.0+"+want {
		t.Errorf("go build: %q, want %q as make build says", got, "blis-sim version 0.1.0+"+want)
	}
}

// TestCoefficientsReportsAreKept: make coefficients ends by naming the
// directory of its fit reports, which must then exist (issue 32, item 7:
// it named a temporary directory its own cleanup had deleted), and without
// ../shared it says what it needs. The script runs in a copy of the
// repository's layout with a stand-in for go and blis-calibrate (the real
// refit takes minutes and rewrites coefficients/).
func TestCoefficientsReportsAreKept(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	if err := os.MkdirAll(filepath.Join(repo, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(repoRoot(), "scripts", "regen-coefficients.sh"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "scripts", "regen-coefficients.sh"), script, 0o755)
	// go build -o X ./cmd/blis-calibrate writes a blis-calibrate that
	// writes its --report file.
	bin := filepath.Join(root, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "go"), []byte(`#!/bin/sh
while [ "$1" != "-o" ]; do shift; done
cat > "$2" <<'EOF2'
#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --report ] && echo fit > "$2"; shift; done
EOF2
chmod +x "$2"
`), 0o755)
	run := func() (string, error) {
		cmd := exec.Command("sh", "scripts/regen-coefficients.sh")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "REPORTS=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err == nil || !strings.Contains(out, "../shared/data/measurements not found") {
		t.Errorf("without ../shared: %v\n%s", err, out)
	}
	os.MkdirAll(filepath.Join(root, "shared", "data", "measurements"), 0o755)
	out, err = run()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m := regexp.MustCompile(`regenerated (\d+) files; reports in (\S+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no closing line:\n%s", out)
	}
	dir := m[2]
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(repo, dir)
	}
	reports, err := os.ReadDir(dir)
	if err != nil || fmt.Sprint(len(reports)) != m[1] {
		t.Errorf("the last line names %s, which holds %d files (%v); want %s reports", m[2], len(reports), err, m[1])
	}
}

// TestSkipOfSharedTestsIsSaid: without ../shared/data, make test says that
// the tests replaying it were skipped (issue 32, item 7: they skipped in
// silence, and go test ./... printed "ok").
func TestSkipOfSharedTestsIsSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test")
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "scripts", "shared-data-tests.sh"))
	cmd.Env = append(os.Environ(), "BLIS_SHARED_DATA="+filepath.Join(t.TempDir(), "no-such-data"), "BLIS_REQUIRE_SHARED=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/shared-data-tests.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "shared-data tests: SKIPPED 2 of 2: ") || !strings.Contains(string(out), "no-such-data is not beside the repository") {
		t.Fatalf("the skip is not said:\n%s", out)
	}
}
