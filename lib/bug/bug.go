// Package bug catches panics in the goroutines a tool starts. Go ends a
// process on an unrecovered panic with exit status 2, which the tools
// reserve for bad input, and a raw stack; the tools instead say in one line
// that it is a bug in blis (see cliutil). A goroutine's panic cannot be
// recovered by another goroutine, so every goroutine the toolkit starts
// defers Catch after its other defers (so it runs before them: a
// wg.Done must not let the waiting goroutine go on with a half result).
package bug

import (
	"runtime/debug"
	"sync/atomic"
)

// Handler reports a panic and ends the process.
type Handler func(value any, stack []byte)

var handler atomic.Pointer[Handler]

// SetHandler installs the process's handler (the tools' cliutil does).
func SetHandler(h Handler) { handler.Store(&h) }

// Catch, deferred first in a goroutine, hands a panic to the handler; with
// none installed (in a library's own tests) it panics on.
func Catch() {
	v := recover()
	if v == nil {
		return
	}
	if h := handler.Load(); h != nil && *h != nil {
		(*h)(v, debug.Stack())
	}
	panic(v)
}
