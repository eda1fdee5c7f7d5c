package cleanup

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRemoveAll(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, ".a.tmp1")
	d := filepath.Join(dir, "spool")
	kept := filepath.Join(dir, "b")
	for _, p := range []string{a, kept} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(d, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	Add(a)
	Add(d)
	forget := Add(kept)
	forget()
	forget()
	if got := len(Pending()); got != 2 {
		t.Fatalf("pending %d, want 2", got)
	}
	if n := RemoveAll(); n != 2 {
		t.Fatalf("RemoveAll = %d, want 2", n)
	}
	for _, p := range []string{a, d} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists", p)
		}
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a forgotten path was removed: %v", err)
	}
	if RemoveAll() != 0 || len(Pending()) != 0 {
		t.Fatal("second RemoveAll found paths")
	}
}
