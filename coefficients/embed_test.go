package coefficients_test

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/lib/latency/fitted"
)

// Every shipped file parses, validates, sits under the canonical name that
// blis-calibrate -o DIR/ gives it (so --latency auto finds it), and is
// written exactly as Marshal writes it (so regenerating changes nothing
// that a fit did not change).
func TestShippedFiles(t *testing.T) {
	n := 0
	err := fs.WalkDir(coefficients.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		n++
		data, err := fs.ReadFile(coefficients.FS, p)
		if err != nil {
			return err
		}
		c, err := fitted.Parse(p, data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if want := c.FileName(); p != want {
			t.Errorf("%s: canonical name is %s", p, want)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Errorf("%s: marshal: %v", p, err)
		} else if !bytes.Equal(out, data) {
			t.Errorf("%s: not in the form blis-calibrate writes", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no coefficients files embedded")
	}
}
