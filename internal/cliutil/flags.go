package cliutil

import (
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
		var r *bool
		switch f := f.(type) {
		case *cli.StringFlag:
			r = &f.Required
		case *cli.PathFlag:
			r = &f.Required
		case *cli.IntFlag:
			r = &f.Required
		case *cli.Int64Flag:
			r = &f.Required
		case *cli.Uint64Flag:
			r = &f.Required
		case *cli.Float64Flag:
			r = &f.Required
		case *cli.DurationFlag:
			r = &f.Required
		case *cli.StringSliceFlag:
			r = &f.Required
		case *cli.BoolFlag:
			r = &f.Required
		}
		if r == nil || !*r {
			continue
		}
		*r = false
		req = append(req, f.Names()[0])
		if u, ok := f.(interface{ GetUsage() string }); ok && !strings.Contains(u.GetUsage(), "required") {
			setUsage(f, u.GetUsage()+" (required)")
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

func setUsage(f cli.Flag, u string) {
	switch f := f.(type) {
	case *cli.StringFlag:
		f.Usage = u
	case *cli.PathFlag:
		f.Usage = u
	case *cli.IntFlag:
		f.Usage = u
	case *cli.Int64Flag:
		f.Usage = u
	case *cli.Uint64Flag:
		f.Usage = u
	case *cli.Float64Flag:
		f.Usage = u
	case *cli.DurationFlag:
		f.Usage = u
	case *cli.StringSliceFlag:
		f.Usage = u
	case *cli.BoolFlag:
		f.Usage = u
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
