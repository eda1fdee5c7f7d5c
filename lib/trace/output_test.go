package trace

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func writeAll(t *testing.T, path string, n int, abort bool) error {
	t.Helper()
	s := RequestsSchema(NewMeta())
	sink, err := Create(path, nil, s)
	if err != nil {
		return err
	}
	w := NewRequestWriter(sink, s)
	for _, r := range sampleRequests(n) {
		r := r
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if abort {
		w.Abort()
		return nil
	}
	return w.Close()
}

func rows(t *testing.T, path string) int {
	t.Helper()
	src, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	got, err := ReadAllRequests(src)
	if err != nil {
		t.Fatal(err)
	}
	return len(got)
}

func TestOutputLifecycle(t *testing.T) {
	for _, name := range []string{"out.arrows", "out.arrow"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			if err := writeAll(t, path, 7, false); err != nil {
				t.Fatal(err)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
				t.Errorf("mode %v, want 0644", fi.Mode().Perm())
			}
			// A failed run leaves the earlier file as it was, and no litter.
			if err := writeAll(t, path, 3, true); err != nil {
				t.Fatal(err)
			}
			if n := rows(t, path); n != 7 {
				t.Errorf("after an aborted run the file has %d rows, want the earlier 7", n)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("temporary files left behind: %v", ents)
			}
			// Through a symbolic link the target is replaced and the link kept.
			link := filepath.Join(dir, "link"+filepath.Ext(name))
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			if err := writeAll(t, link, 5, false); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link was replaced: %v %v", fi, err)
			}
			if n := rows(t, path); n != 5 {
				t.Errorf("target has %d rows, want 5", n)
			}
		})
	}
}

// A FIFO (like /dev/null or /dev/stdout) is written in place, never replaced.
func TestOutputToFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no mkfifo:", err)
	}
	got := make(chan []byte)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- b
	}()
	if err := writeAll(t, fifo, 4, false); err != nil {
		t.Fatal(err)
	}
	data := <-got
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
	src, err := Open("-", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := ReadAllRequests(src)
	if err != nil || len(reqs) != 4 {
		t.Fatalf("read %d rows through the FIFO, %v", len(reqs), err)
	}
}

// Hold: the writer's Close completes the table but leaves it under its
// temporary name; the output's Close puts it in place, Abort discards it.
func TestHold(t *testing.T) {
	for _, name := range []string{"out.arrows", "out.arrow"} {
		for _, commit := range []bool{true, false} {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			s := RequestsSchema(NewMeta())
			out, err := Create(path, nil, s)
			if err != nil {
				t.Fatal(err)
			}
			w := NewRequestWriter(Hold(out), s)
			for _, r := range sampleRequests(4) {
				if err := w.Write(&r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("%s: in place before the output's Close: %v", name, err)
			}
			if commit {
				if err := out.Close(); err != nil {
					t.Fatal(err)
				}
				if n := rows(t, path); n != 4 {
					t.Fatalf("%s: %d rows, want 4", name, n)
				}
			} else {
				Abort(out)
			}
			ents, _ := os.ReadDir(dir)
			if want := map[bool]int{true: 1, false: 0}[commit]; len(ents) != want {
				t.Errorf("%s commit=%v: directory holds %v, want %d files", name, commit, ents, want)
			}
		}
	}
}
