package badinput

import (
	"errors"
	"fmt"
	"testing"
)

type rowErr struct{}

func (rowErr) Error() string  { return "a.csv: row 3: bad" }
func (rowErr) BadInput() bool { return true }

type notBad struct{}

func (notBad) Error() string  { return "x" }
func (notBad) BadInput() bool { return false }

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("disk full"), false},
		{"errorf", Errorf("--n: expected > 0, found %d", -1), true},
		{"wrapped errorf", fmt.Errorf("run: %w", Errorf("x")), true},
		{"wrap", Wrap(errors.New("x")), true},
		{"typed marker, wrapped", fmt.Errorf("reading: %w", rowErr{}), true},
		{"marker saying no", notBad{}, false},
	} {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("%s: Is = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWrap(t *testing.T) {
	if Wrap(nil) != nil {
		t.Fatal("Wrap(nil) must be nil")
	}
	e := Errorf("x")
	if Wrap(e) != e {
		t.Fatal("Wrap of a marked error must return it unchanged")
	}
	r := fmt.Errorf("ctx: %w", rowErr{})
	if Wrap(r) != r {
		t.Fatal("Wrap of a typed marker must return it unchanged")
	}
}
