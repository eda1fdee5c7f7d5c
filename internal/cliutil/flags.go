package cliutil

import (
	"reflect"
	"regexp"
	"strings"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/urfave/cli/v2"
)

// requireFlags replaces urfave's Required: true, which prints the whole
// help on stdout (a JSON channel for blis-eval) and exits 1, with a check
// before the action: one line on stderr naming the missing flags, exit 2,
// nothing on stdout. --help and --version still work without them.
func requireFlags(app *cli.App) {
	var req []string
	for _, f := range app.Flags {
		// Every urfave flag type has Required and Usage fields.
		v := reflect.ValueOf(f)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			continue
		}
		r, u := v.Elem().FieldByName("Required"), v.Elem().FieldByName("Usage")
		if !r.IsValid() || r.Kind() != reflect.Bool || !r.Bool() {
			continue
		}
		r.SetBool(false)
		req = append(req, f.Names()[0])
		if u.IsValid() && u.Kind() == reflect.String && !strings.Contains(u.String(), "required") {
			u.SetString(strings.TrimSpace(u.String() + " (required)"))
		}
	}
	if len(req) == 0 || app.Action == nil {
		return
	}
	action := app.Action
	app.Action = func(c *cli.Context) error {
		var missing []string
		for _, n := range req {
			if !c.IsSet(n) {
				missing = append(missing, "--"+n)
			}
		}
		switch len(missing) {
		case 0:
			return action(c)
		case 1:
			return badinput.Errorf("%s is required (%s --help lists every flag)", missing[0], c.App.Name)
		}
		return badinput.Errorf("%s and %s are required (%s --help lists every flag)",
			strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1], c.App.Name)
	}
}

// Go's flag package names a flag with one dash in its errors ("flag
// provided but not defined: -bogus-flag"); the tools' flags are written
// with two.
var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	oneDashFlag   = regexp.MustCompile(`(^|[ :])-([A-Za-z][A-Za-z0-9-]+)\b`)
)

// flagError rewrites a flag-parsing error as the tools speak: "unknown flag
// --bogus-flag", with the closest flag when one is close ("unknown flag
// --replica (did you mean --replicas?)"), and flags with two dashes.
func flagError(app *cli.App, err error) error {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		name := m[1]
		msg = "unknown flag " + dashes(name)
		if s := closestFlag(app.Flags, name); s != "" {
			msg += " (did you mean " + dashes(s) + "?)"
		}
		return badinput.Errorf("%s", msg+"; "+app.Name+" --help lists every flag")
	}
	return badinput.Errorf("%s", oneDashFlag.ReplaceAllString(msg, "$1--$2"))
}

func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// closestFlag is the flag name nearest to name, if it is near: within
// an edit distance of a third of its length (at least 2), or one of them
// a prefix of the other.
func closestFlag(flags []cli.Flag, name string) string {
	best, bestD := "", 1<<30
	for _, f := range flags {
		for _, n := range f.Names() {
			d := editDistance(n, name)
			if len(n) > 1 && len(name) > 2 && (strings.HasPrefix(n, name) || strings.HasPrefix(name, n)) {
				d = min(d, 1)
			}
			if d < bestD {
				best, bestD = n, d
			}
		}
	}
	if best == "" || bestD > max(2, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
