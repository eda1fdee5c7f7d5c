package e2e

import (
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
	for _, want := range []string{"bench/run.sh", "scripts/browser-tests.sh"} {
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
