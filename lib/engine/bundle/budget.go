package bundle

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.starlark.net/starlark"
)

// What an evaluation may cost. A policy search calls the simulator
// thousands of times; one legal but slow candidate must not stall it. Two
// bounds: the Starlark steps of the whole run (sandbox.max_run_steps, or a
// caller's cap: RunSteps), counted across stages and counterfactual
// forks; and an interruption from outside (Interrupt: blis-eval's
// --timeout), which cancels the Starlark call in progress at once and makes
// Err stop the engine at its next decision or step.

// guard is shared by a runtime and its forks.
type guard struct {
	maxSteps uint64 // whole-run Starlark steps (0: no bound)
	steps    uint64 // used so far

	stopped atomic.Pointer[error] // set by Interrupt
	mu      sync.Mutex
	threads []*starlark.Thread // every Starlark thread of the run and its forks
}

func newGuard(maxSteps uint64) *guard { return &guard{maxSteps: maxSteps} }

// register adds a Starlark thread to be cancelled by Interrupt (at once if
// it already happened).
func (g *guard) register(t *starlark.Thread) {
	g.mu.Lock()
	g.threads = append(g.threads, t)
	g.mu.Unlock()
	if e := g.stopped.Load(); e != nil {
		t.Cancel((*e).Error())
	}
}

// err is the interruption, or nil.
func (g *guard) err() error {
	if e := g.stopped.Load(); e != nil {
		return *e
	}
	return nil
}

// Interrupt stops the run (and its forks) with err: the Starlark call in
// progress is cancelled, and Err reports err from now on, so the engine
// stops at its next decision or step. Safe from any goroutine; the first
// call wins.
func (rt *Runtime) Interrupt(err error) {
	g := rt.g
	if !g.stopped.CompareAndSwap(nil, &err) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.threads {
		t.Cancel(err.Error())
	}
}

// LimitRunSteps caps the whole run's Starlark steps at n (0: no cap), below
// the bundle's own sandbox.max_run_steps when that is lower: the caller (a
// search loop) sets the budget, not the candidate.
func (rt *Runtime) LimitRunSteps(n uint64) {
	if n > 0 && (rt.g.maxSteps == 0 || n < rt.g.maxSteps) {
		rt.g.maxSteps = n
	}
}

// RunSteps is the Starlark steps the run (and its forks) took so far.
func (rt *Runtime) RunSteps() uint64 { return rt.g.steps }

// errRunBudget is the whole-run budget's error.
func (g *guard) errRunBudget() error {
	return fmt.Errorf("whole-run step budget exceeded: more than %d Starlark steps in the run (sandbox.max_run_steps, or the evaluator's cap)", g.maxSteps)
}

// ErrInterrupted marks an interruption's error (errors.Is).
var ErrInterrupted = errors.New("interrupted")
