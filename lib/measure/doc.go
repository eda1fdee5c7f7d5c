// Package measure reads real measurements of serving engines: closed-loop
// serving points (aiconfigurator's silicon_sample.csv), step timings
// (Splitwise's perf_model.csv, a generic step CSV), and recorded runs (a
// request trace with recorded latencies, its engine configuration and its
// queue time series, as LLMServingSim's vLLM runs store them). blis-calibrate
// fits latency models to them and bench/fidelity judges the simulator on
// them. Request traces themselves are read by lib/convert; this package adds
// what a trace does not carry.
package measure

import "fmt"

// InputError names the file, the 1-based line, the field, and what was
// expected and found. It is bad input (exit 2), never a panic.
type InputError struct {
	Path  string
	Line  int
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	loc := e.Path
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.Path, e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: field %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// BadInput marks the error as the user's to fix (exit status 2).
func (e *InputError) BadInput() bool { return true }
