package trace

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
)

// ReasonClass names the kind of a drop_reason, without the numbers and ids
// that make each request's reason its own ("needs 40 KV blocks (630 tokens),
// an instance has 10" is "needs more KV blocks than a replica has"), so that
// reasons can be counted. It knows the reasons lib/engine writes; any other
// reason is kept with its digit runs replaced by N.
func ReasonClass(reason string) string {
	switch {
	case reason == "":
		return ""
	case strings.HasPrefix(reason, "needs ") && strings.Contains(reason, " KV blocks"):
		if strings.Contains(reason, "tokens per request") {
			return "more tokens than a request can have"
		}
		if i := strings.Index(reason, ", a replica of "); i >= 0 {
			dep := reason[i+len(", a replica of "):]
			if j := strings.LastIndex(dep, " has "); j >= 0 {
				return "needs more KV blocks than a replica of " + dep[:j] + " has"
			}
		}
		return "needs more KV blocks than a replica has"
	case strings.HasPrefix(reason, "dependency "):
		f := strings.Fields(reason)
		return "a dependency was " + f[len(f)-1]
	case strings.HasPrefix(reason, "client timeout after "):
		return "client timeout"
	case strings.HasPrefix(reason, "no deployment serves model "):
		return reason
	}
	// An admission policy's reason: its name before the colon.
	if i := strings.Index(reason, ": "); i > 0 && !strings.ContainsFunc(reason[:i], unicode.IsSpace) {
		return reason[:i]
	}
	return NumbersToN(reason)
}

// NumbersToN replaces each run of digits in s by N, so that messages that
// differ only in their numbers (ports, counts, sizes) count as one kind.
func NumbersToN(s string) string {
	var b strings.Builder
	digits := false
	for _, r := range s {
		if unicode.IsDigit(r) {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}

// ReasonCount is how many rows of one status had reasons of one class.
type ReasonCount struct {
	Status, Class string
	N             int64
	Example       string // the first reason of the class, as written
}

// ReasonTally counts drop reasons by status and class.
type ReasonTally struct {
	idx  map[[2]string]int
	list []ReasonCount
}

// Add counts a row with a reason; rows without one are not counted.
func (t *ReasonTally) Add(status, reason string) {
	t.AddN(status, reason, 1)
}

// AddN counts n rows with the same status and reason.
func (t *ReasonTally) AddN(status, reason string, n int64) {
	if reason == "" || n == 0 {
		return
	}
	t.AddClass(status, ReasonClass(reason), reason, n)
}

// AddClass counts n rows of a kind the caller has already named (blis-load
// names a failure by its HTTP status or error class); example is the first
// reason kept for the kind.
func (t *ReasonTally) AddClass(status, class, example string, n int64) {
	if n == 0 {
		return
	}
	k := [2]string{status, class}
	i, ok := t.idx[k]
	if !ok {
		if t.idx == nil {
			t.idx = map[[2]string]int{}
		}
		i = len(t.list)
		t.idx[k] = i
		t.list = append(t.list, ReasonCount{Status: status, Class: class, Example: example})
	}
	t.list[i].N += n
}

// Counts returns the counts by status (in the order given, others after
// in name order), then most frequent first, then class name.
func (t *ReasonTally) Counts(statusOrder ...string) []ReasonCount {
	rank := func(s string) int {
		for i, o := range statusOrder {
			if o == s {
				return i
			}
		}
		return len(statusOrder)
	}
	out := append([]ReasonCount(nil), t.list...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(a.Status), rank(b.Status); ra != rb {
			return ra < rb
		}
		if a.Status != b.Status {
			return a.Status < b.Status
		}
		if a.N != b.N {
			return a.N > b.N
		}
		return a.Class < b.Class
	})
	return out
}

// Total is the number of rows counted for status.
func (t *ReasonTally) Total(status string) int64 {
	var n int64
	for _, c := range t.list {
		if c.Status == status {
			n += c.N
		}
	}
	return n
}

// WriteReasons writes reason counts (Counts' order) one kind a line,
// "<indent>   12345 timed_out client timeout (e.g. client timeout after
// 1 µs)", at most max lines (0: all): the kinds left out are one last line
// saying how many, with their rows, so that no failure goes unmentioned.
// blis-sim's and blis-load's summaries both write their reasons with it.
func WriteReasons(w io.Writer, indent string, counts []ReasonCount, max int) {
	for i, r := range counts {
		if max > 0 && i == max && len(counts) > max {
			var rows int64
			for _, x := range counts[i:] {
				rows += x.N
			}
			fmt.Fprintf(w, "%s%8d rows of %d more kinds (the drop_reason column has every one)\n", indent, rows, len(counts)-i)
			return
		}
		ex := ""
		if r.Example != "" && r.Example != r.Class {
			ex = " (e.g. " + r.Example + ")"
		}
		fmt.Fprintf(w, "%s%8d %-9s %s%s\n", indent, r.N, r.Status, r.Class, ex)
	}
}

// ResultSink is where a simulator writes results (*ResultWriter is one).
type ResultSink interface{ Write(*Result) error }

// DropCounter passes results on to W, counting the reasons of the dropped,
// rejected and timed-out ones: blis-sim reports them, since a reason that
// is only in the drop_reason column goes unseen.
type DropCounter struct {
	W     ResultSink
	Tally ReasonTally
}

func (d *DropCounter) Write(r *Result) error {
	if r.Status == StatusDropped || r.Status == StatusRejected || r.Status == StatusTimedOut {
		d.Tally.Add(r.Status, r.DropReason)
	}
	return d.W.Write(r)
}
