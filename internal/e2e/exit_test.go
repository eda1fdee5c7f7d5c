package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: what a user's terminal is to a
// tool whose stdout is the secondary side.
func openPTY(t *testing.T) (primary, secondary *os.File) {
	t.Helper()
	p, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(p.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		p.Close()
		t.Skipf("unlocking a pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		p.Close()
		t.Skipf("naming a pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		p.Close()
		t.Skipf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { s.Close(); p.Close() })
	return p, s
}

// TestExitStatusesAndMessages: the exit-status rule (0 success, 2 bad usage
// or input, 1 anything else) and one-line messages, through the real
// binaries (issue 32, items 9, 10 and 11): refusing to write binary to a
// terminal exited 1 in blis-synth; a truncated .arrow.gz exited 1 in
// blis-convert --count; a run that served nothing because every request
// timed out exited 0; a missing input or a busy port came after the
// ~400-character latency paragraph, with the path named twice.
func TestExitStatusesAndMessages(t *testing.T) {
	bin := binaries(t)
	dir := t.TempDir()
	root := repoRoot()
	azure := filepath.Join(root, "testdata", "azure2023_code.csv")
	reqs := filepath.Join(dir, "reqs.arrow")
	if out, err := exec.Command(filepath.Join(bin, "blis-convert"), "--limit", "300", azure, "-o", reqs).CombinedOutput(); err != nil {
		t.Fatalf("blis-convert: %v\n%s", err, out)
	}
	// A gzipped table cut in the middle.
	whole, err := os.ReadFile(reqs)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(whole)
	zw.Close()
	trunc := filepath.Join(dir, "trunc.arrow.gz")
	os.WriteFile(trunc, gz.Bytes()[:gz.Len()/2], 0o644)
	// A port in use.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	_, tty := openPTY(t)

	for _, tc := range []struct {
		name   string
		args   []string
		tty    bool   // stdout is a terminal
		status int    //
		line   string // the whole of stderr: one line (prefix match with a trailing …)
	}{
		{"blis-synth to a terminal", []string{"blis-synth", "--example", "react"}, true, 2,
			"blis-synth: refusing to write binary Arrow to a terminal: pipe it into another blis tool (e.g. | blis-report) or use -o FILE"},
		{"blis-convert to a terminal", []string{"blis-convert", azure}, true, 2, "blis-convert: refusing to write binary Arrow to a terminal…"},
		{"blis-sim to a terminal", []string{"blis-sim", "-q", reqs}, true, 2, "blis-sim: refusing to write binary Arrow to a terminal…"},
		{"blis-convert --count, truncated .gz", []string{"blis-convert", "--count", trunc}, false, 2,
			"blis-convert: " + trunc + ": reading the arrow table: unexpected EOF (truncated or corrupt?)"},
		{"blis-sim, truncated .gz", []string{"blis-sim", "-q", "-o", filepath.Join(dir, "x.arrow"), trunc}, false, 2, "blis-sim: " + trunc + ": …"},
		{"blis-report, truncated .gz", []string{"blis-report", trunc}, false, 2, "blis-report: " + trunc + ": …"},
		{"blis-sim, missing input", []string{"blis-sim", "-o", filepath.Join(dir, "y.arrow"), "nosuch.arrow"}, false, 2,
			"blis-sim: nosuch.arrow: no such file or directory"},
		{"blis-report, missing input", []string{"blis-report", "nosuch.arrow"}, false, 2, "blis-report: nosuch.arrow: no such file or directory"},
		{"blis-serve, busy port", []string{"blis-serve", "--listen", busy}, false, 2, "blis-serve: --listen: listen tcp " + busy + ": bind: address already in use"},
		{"blis-sim, unknown flag", []string{"blis-sim", "--replica", "2", reqs}, false, 2,
			"blis-sim: unknown flag --replica (did you mean --replicas?); blis-sim --help lists every flag"},
		{"blis-sim, every request timed out", []string{"blis-sim", "-q", "--client-timeout", "1us", "-o", filepath.Join(dir, "z.arrow"), reqs}, false, 2,
			"blis-sim: every request was dropped, rejected or timed out, none served: 300 timed_out: client timeout (e.g. client timeout after 1 µs)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(bin, tc.args[0]), tc.args[1:]...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if tc.tty {
				cmd.Stdout = tty
			}
			err := cmd.Run()
			status := 0
			if ee, isExit := err.(*exec.ExitError); isExit {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			got := stderr.String()
			ok := strings.Count(got, "\n") == 1
			if want, prefix := strings.CutSuffix(tc.line, "…"); prefix {
				ok = ok && strings.HasPrefix(got, want)
			} else {
				ok = ok && got == tc.line+"\n"
			}
			if status != tc.status || !ok {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and the one line %q", status, got, tc.status, tc.line)
			}
		})
	}
}
