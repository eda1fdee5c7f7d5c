package scenario

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/blis-sim/blis/lib/engine/row"
)

// fatal is a testing.TB whose Fatalf panics with the message, so that a
// test can check what a harness would have failed with.
type fatal struct{ testing.TB }

type fatalMsg string

func (fatal) Helper()                           {}
func (fatal) Fatalf(format string, args ...any) { panic(fatalMsg(fmt.Sprintf(format, args...))) }

// args parses a directive line as datadriven does.
func args(t *testing.T, line string) *Args {
	t.Helper()
	_, a, err := datadriven.ParseLine(line)
	if err != nil {
		t.Fatal(err)
	}
	return &Args{tb: fatal{t}, pos: "x.txt:1", args: a, used: make([]bool, len(a))}
}

// failure runs f and returns the message it failed with ("" if none).
func failure(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			m, ok := r.(fatalMsg)
			if !ok {
				panic(r)
			}
			msg = string(m)
		}
	}()
	f()
	return ""
}

func TestGetters(t *testing.T) {
	a := args(t, "cmd n=1_000 f=2.5 on off=false bare s=abc list=(1, 2, 3) fl=(0.5, 2) r1 r2")
	if got := a.Int("n", 0); got != 1000 {
		t.Errorf("Int: %d", got)
	}
	if got := a.Int("absent", -7); got != -7 {
		t.Errorf("Int default: %d", got)
	}
	if got := a.Float("f", 0); got != 2.5 {
		t.Errorf("Float: %g", got)
	}
	if !a.Bool("on", false) || a.Bool("off", true) || !a.Bool("bare", false) || !a.Bool("absent", true) {
		t.Error("Bool")
	}
	if a.Str("s", "") != "abc" || a.Str("absent", "d") != "d" {
		t.Error("Str")
	}
	if got := a.Ints("list"); !reflect.DeepEqual(got, []int64{1, 2, 3}) {
		t.Errorf("Ints: %v", got)
	}
	if got := a.Floats("fl"); !reflect.DeepEqual(got, []float64{0.5, 2}) {
		t.Errorf("Floats: %v", got)
	}
	// "on" and "bare" were read as flags already; the names left are r1, r2.
	if got := a.Names(); !reflect.DeepEqual(got, []string{"on", "bare", "r1", "r2"}) {
		t.Errorf("Names: %v", got)
	}
	if msg := failure(a.Done); msg != "" {
		t.Errorf("Done after reading everything: %s", msg)
	}
}

// Bad values and unread keys fail the test with the position and the key.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		line string
		f    func(a *Args)
		want string
	}{
		{"cmd n=x", func(a *Args) { a.Int("n", 0) }, `x.txt:1: n: expected an integer, found "x"`},
		{"cmd n=(1, 2)", func(a *Args) { a.Int("n", 0) }, "n: expected one value, found 2"},
		{"cmd b=maybe", func(a *Args) { a.Bool("b", false) }, `b: expected true or false, found "maybe"`},
		{"cmd k=(1, -2)", func(a *Args) { a.Keys("k") }, "k: expected non-negative integers, found -2"},
		{"cmd blcok=16", func(a *Args) { a.Int("block", 16); a.Done() }, `x.txt:1: unknown argument "blcok"`},
		{"cmd limit=x", func(a *Args) { a.Rest() }, `limit: expected a number, found "x"`},
	} {
		if got := failure(func() { tc.f(args(t, tc.line)) }); !strings.Contains(got, tc.want) {
			t.Errorf("%s: failed with %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestRest(t *testing.T) {
	a := args(t, "policy routing=weighted load=1 prefix=3")
	a.Str("routing", "")
	if got := a.Rest(); !reflect.DeepEqual(got, map[string]float64{"load": 1, "prefix": 3}) {
		t.Errorf("Rest: %v", got)
	}
}

func TestRequest(t *testing.T) {
	a := args(t, "r2 at=5 in=100 out=7 deps=(r0, r1) delay=300 timeout=9000 prefix=(4, 5) prio=2 model=m")
	r := Request("r2", a)
	a.Done()
	want := row.NewRequest("r2")
	want.ArrivalUS, want.InputTokens, want.OutputTokens, want.DependsOn = 5, 100, 7, []string{"r0", "r1"}
	want.DelayUS, want.TimeoutUS, want.PrefixHashes, want.Priority, want.Model = 300, 9000, []uint64{4, 5}, 2, "m"
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
	// A replica's scenario gives no arrival: valid.
	if msg := failure(func() { Request("r", args(t, "r in=4 out=1")) }); msg != "" {
		t.Errorf("no arrival: %s", msg)
	}
	if msg := failure(func() { Request("r", args(t, "r in=0 out=1")) }); !strings.Contains(msg, "column input_tokens") {
		t.Errorf("empty prompt: %q", msg)
	}
}

func TestFormatting(t *testing.T) {
	if T(row.Null) != "-" || T(1200) != "1200" {
		t.Error("T")
	}
	if Plural(1, "token") != "1 token" || Plural(0, "token") != "0 tokens" || Plural(3, "step") != "3 steps" {
		t.Error("Plural")
	}
}
