// Package badinput is the one way a blis package says that an error comes
// from the user's flags or input data, so that running again unchanged
// cannot help: the tools exit with status 2 for it (and 1 for every other
// error). An error is bad input when it, or an error it wraps, has a
// BadInput method that returns true; *Error is the ready-made one, and
// typed errors that carry more (trace.RowError, convert.BadRowError) have
// the method themselves.
package badinput

import (
	"errors"
	"fmt"
)

// Marker is what Is looks for in an error's chain.
type Marker interface{ BadInput() bool }

// Error marks the error it wraps as bad input.
type Error struct{ Err error }

func (e *Error) Error() string  { return e.Err.Error() }
func (e *Error) Unwrap() error  { return e.Err }
func (e *Error) BadInput() bool { return true }

// Errorf formats a bad-input error (%w wraps as in fmt.Errorf).
func Errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// Wrap marks err as bad input; nil stays nil and a marked error is returned
// as it is.
func Wrap(err error) error {
	if err == nil || Is(err) {
		return err
	}
	return &Error{Err: err}
}

// Is reports whether err is bad input.
func Is(err error) bool {
	var m Marker
	return errors.As(err, &m) && m.BadInput()
}
