// Package scenario is what the engine rooms' scenario tests share: reading
// the arguments of a datadriven directive (github.com/cockroachdb/datadriven,
// the format etcd's raft and Pebble test with), request lines, a small
// vLLM engine built from a `config` line, and the formatting of what
// happened. Only tests import it.
//
// A scenario file is a list of directives:
//
//	# what this case shows
//	command key=value key=(v1, v2) flag
//	input lines, one item each: name key=value ...
//	----
//	the expected log (rewritten by `go test -rewrite`)
//
// Times are µs. An argument no harness reads is an error, so a typo does not
// silently leave a default in place.
package scenario

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Args are the arguments of one directive or input line. Each getter marks
// its key as read; Done fails the test on any key left unread.
type Args struct {
	tb   testing.TB
	pos  string
	args []datadriven.CmdArg
	used []bool
}

// Of returns the arguments of td's directive line.
func Of(tb testing.TB, td *datadriven.TestData) *Args {
	return &Args{tb: tb, pos: td.Pos, args: td.CmdArgs, used: make([]bool, len(td.CmdArgs))}
}

// Line is one line of a directive's input: a name followed by arguments,
// in the directive syntax ("r1 in=100 out=5 deps=(r0)").
type Line struct {
	Name string
	*Args
}

// Lines parses td's input, skipping blank lines and # comments.
func Lines(tb testing.TB, td *datadriven.TestData) []Line {
	tb.Helper()
	var out []Line
	for i, s := range strings.Split(td.Input, "\n") {
		s = strings.TrimSpace(s)
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		pos := fmt.Sprintf("%s (input line %d)", td.Pos, i+1)
		name, args, err := datadriven.ParseLine(s)
		if err != nil {
			tb.Fatalf("%s: %v", pos, err)
		}
		out = append(out, Line{Name: name, Args: &Args{tb: tb, pos: pos, args: args, used: make([]bool, len(args))}})
	}
	return out
}

// Fatalf fails the test at the directive's position.
func (a *Args) Fatalf(format string, args ...any) {
	a.tb.Helper()
	a.tb.Fatalf("%s: %s", a.pos, fmt.Sprintf(format, args...))
}

func (a *Args) find(key string) (datadriven.CmdArg, bool) {
	for i, x := range a.args {
		if x.Key == key {
			a.used[i] = true
			return x, true
		}
	}
	return datadriven.CmdArg{}, false
}

// Has reports whether key is given (and marks it read).
func (a *Args) Has(key string) bool {
	_, ok := a.find(key)
	return ok
}

func (a *Args) one(key string) (string, bool) {
	a.tb.Helper()
	x, ok := a.find(key)
	if !ok {
		return "", false
	}
	if len(x.Vals) != 1 {
		a.Fatalf("%s: expected one value, found %d", key, len(x.Vals))
	}
	return x.Vals[0], true
}

// ParseInt reads a decimal integer; "_" may group digits (1_000_000).
func ParseInt(s string) (int64, error) {
	return strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), "_", ""), 10, 64)
}

// Int is key's integer value, or def.
func (a *Args) Int(key string, def int64) int64 {
	a.tb.Helper()
	s, ok := a.one(key)
	if !ok {
		return def
	}
	v, err := ParseInt(s)
	if err != nil {
		a.Fatalf("%s: expected an integer, found %q", key, s)
	}
	return v
}

// Float is key's number, or def.
func (a *Args) Float(key string, def float64) float64 {
	a.tb.Helper()
	s, ok := a.one(key)
	if !ok {
		return def
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil {
		a.Fatalf("%s: expected a number, found %q", key, s)
	}
	return v
}

// Bool is key's value: a bare key means true, else true/false/on/off.
func (a *Args) Bool(key string, def bool) bool {
	a.tb.Helper()
	x, ok := a.find(key)
	if !ok {
		return def
	}
	if len(x.Vals) == 0 {
		return true
	}
	switch x.Vals[0] {
	case "true", "on", "yes":
		return true
	case "false", "off", "no":
		return false
	}
	a.Fatalf("%s: expected true or false, found %q", key, x.Vals[0])
	return false
}

// Str is key's value, or def.
func (a *Args) Str(key, def string) string {
	a.tb.Helper()
	s, ok := a.one(key)
	if !ok {
		return def
	}
	return s
}

// Strs is key's values (key=(a, b) or key=a); nil when absent.
func (a *Args) Strs(key string) []string {
	x, ok := a.find(key)
	if !ok {
		return nil
	}
	return x.Vals
}

// Ints is key's integer values; nil when absent.
func (a *Args) Ints(key string) []int64 {
	a.tb.Helper()
	var out []int64
	for _, s := range a.Strs(key) {
		v, err := ParseInt(s)
		if err != nil {
			a.Fatalf("%s: expected integers, found %q", key, s)
		}
		out = append(out, v)
	}
	return out
}

// Keys is key's values as uint64 (prefix hashes, cache keys); nil when absent.
func (a *Args) Keys(key string) []uint64 {
	a.tb.Helper()
	var out []uint64
	for _, v := range a.Ints(key) {
		if v < 0 {
			a.Fatalf("%s: expected non-negative integers, found %d", key, v)
		}
		out = append(out, uint64(v))
	}
	return out
}

// Floats is key's numbers; nil when absent.
func (a *Args) Floats(key string) []float64 {
	a.tb.Helper()
	var out []float64
	for _, s := range a.Strs(key) {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			a.Fatalf("%s: expected numbers, found %q", key, s)
		}
		out = append(out, v)
	}
	return out
}

// Names returns the keys given without a value ("cancel r1 r2"), marking
// them read.
func (a *Args) Names() []string {
	var out []string
	for i, x := range a.args {
		if len(x.Vals) == 0 {
			a.used[i] = true
			out = append(out, x.Key)
		}
	}
	return out
}

// Rest returns the arguments no getter has read yet, as numbers (a
// policy template's parameters), marking them read.
func (a *Args) Rest() map[string]float64 {
	a.tb.Helper()
	out := map[string]float64{}
	for i, x := range a.args {
		if a.used[i] {
			continue
		}
		a.used[i] = true
		if len(x.Vals) != 1 {
			a.Fatalf("%s: expected one number", x.Key)
		}
		v, err := strconv.ParseFloat(x.Vals[0], 64)
		if err != nil {
			a.Fatalf("%s: expected a number, found %q", x.Key, x.Vals[0])
		}
		out[x.Key] = v
	}
	return out
}

// Done fails on any argument no getter read (a typo, or a key this
// command does not take).
func (a *Args) Done() {
	a.tb.Helper()
	for i, x := range a.args {
		if !a.used[i] {
			a.Fatalf("unknown argument %q", x.Key)
		}
	}
}

// Request reads a request line's keys into a request named name:
//
//	at=µs in=tokens out=tokens deps=(ids) delay=µs timeout=µs kind=llm|tool
//	prefix=(h1, h2, ...) prio=n model=name
//
// prefix is the prompt's prefix hashes, one per block of the prefix block
// size (the engine's block size unless the harness says otherwise); the
// same hashes mean the same prefix. The caller reads its own keys and
// calls Done.
func Request(name string, a *Args) row.Request {
	a.tb.Helper()
	r := row.NewRequest(name)
	r.ArrivalUS = a.Int("at", row.Null)
	r.InputTokens = int32(a.Int("in", 0))
	r.OutputTokens = int32(a.Int("out", 0))
	r.DependsOn = a.Strs("deps")
	r.DelayUS = a.Int("delay", 0)
	r.TimeoutUS = a.Int("timeout", 0)
	r.Kind = a.Str("kind", row.KindLLM)
	r.PrefixHashes = a.Keys("prefix")
	r.Priority = int32(a.Int("prio", 0))
	r.Model = a.Str("model", "")
	r.NumImages = int32(a.Int("images", 0))
	r.LoRA = a.Str("lora", "")
	v := r
	if v.ArrivalUS == row.Null && len(v.DependsOn) == 0 {
		v.ArrivalUS = 0 // a replica's scenario: arrival is the harness's clock
	}
	if err := v.Validate(); err != nil {
		a.Fatalf("request %s: %v", name, err)
	}
	return r
}

// State is a fresh request state for req, as the cluster makes one.
func State(req row.Request) *request.State {
	r := &request.State{}
	r.Reset()
	r.Req = req
	return r
}

// T formats a time in µs; "-" when absent (row.Null).
func T(us int64) string {
	if us == row.Null {
		return "-"
	}
	return strconv.FormatInt(us, 10)
}

// Log collects a command's output lines.
type Log struct{ strings.Builder }

// Printf adds one line.
func (l *Log) Printf(format string, args ...any) {
	fmt.Fprintf(&l.Builder, format, args...)
	l.WriteByte('\n')
}

// Harness runs one scenario file's directives, returning each one's log.
type Harness func(t *testing.T, td *datadriven.TestData) string

// Run runs every file under testdata (subtests by path), each against a
// harness fresh returns.
func Run(t *testing.T, fresh func() Harness) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, fresh())
	})
}
