package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C or SIGTERM on a real process: the temporaries of its outputs are
// removed, one line says so, and the status is 128 + the signal (130, 143).
func TestSignalsRemoveTemporaries(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	reqs := filepath.Join(dir, "req.arrows")
	file := filepath.Join(dir, "req.arrow")
	for _, out := range []string{reqs, file} {
		cmd := exec.Command(filepath.Join(bin, "blis-convert"), filepath.Join(repoRoot(), "testdata", "azure2023_code.csv"), "-o", out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("blis-convert: %v\n%s", err, b)
		}
	}
	stream, err := os.ReadFile(reqs)
	if err != nil {
		t.Fatal(err)
	}
	ipcFile, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tool  string
		args  []string
		input []byte // written to stdin, which then stays open
		sig   syscall.Signal
		want  int
		temps int // temporaries the tool has made when it is signalled
	}{
		// blis-sim streams a sorted table: its -o and --steps temporaries
		// exist while it waits for more rows.
		{"sim SIGINT", "blis-sim", []string{"-o", "out.arrow", "--steps", "steps.arrows"}, stream[:300_000], syscall.SIGINT, 130, 2},
		{"sim SIGTERM", "blis-sim", []string{"-o", "out.arrows"}, stream[:300_000], syscall.SIGTERM, 143, 1},
		// An IPC file piped in is spooled to a temporary file first.
		{"report spooling stdin", "blis-report", []string{"--format", "csv"}, ipcFile[:300_000], syscall.SIGINT, 130, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			tmp := filepath.Join(work, "tmp")
			if err := os.Mkdir(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(filepath.Join(bin, tc.tool), append(tc.args, "-")...)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Stdout = io.Discard
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			go stdin.Write(tc.input)
			// Wait for the temporaries to appear.
			deadline := time.Now().Add(20 * time.Second)
			for len(temporaries(t, work, tmp)) < tc.temps {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("no temporaries appeared; stderr:\n%s", stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			status := cmd.ProcessState.ExitCode()
			if status != tc.want {
				t.Fatalf("status %d (%v), want %d; stderr:\n%s", status, err, tc.want, stderr.String())
			}
			if left := temporaries(t, work, tmp); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			what := map[syscall.Signal]string{syscall.SIGINT: "interrupted (SIGINT)", syscall.SIGTERM: "terminated (SIGTERM)"}[tc.sig]
			want := tc.tool + ": " + what + ": stopped; removed "
			if !strings.HasPrefix(last, want) || strings.Count(stderr.String(), tc.tool+": ") != 1 {
				t.Errorf("want one line starting %q, stderr:\n%s", want, stderr.String())
			}
		})
	}
}

// temporaries lists the files in work and tmp other than tmp itself.
func temporaries(t *testing.T, dirs ...string) []string {
	t.Helper()
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "tmp" {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	return out
}
