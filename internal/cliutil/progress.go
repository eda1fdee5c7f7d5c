package cliutil

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// PlainEvery is how often a forced progress line (--progress) is printed.
const PlainEvery = 5 * time.Second

// Progress shows a long run's progress on stderr, never on stdout: on a
// terminal a bar that appears after two seconds, with the total and an ETA
// when the total is known; elsewhere, when forced (--progress), one plain
// line every PlainEvery, and a last one at the end. A nil *Progress is off.
type Progress struct {
	w      io.Writer
	name   string // the tool, for plain lines
	unit   string // "requests"
	total  int64  // -1 when unknown
	plain  bool
	start  time.Time
	last   time.Time // of the last plain line
	bar    *progressbar.ProgressBar
	done   int64
	detail string
	// schedule: the run follows a schedule whose last item is due this
	// long after the start (blis-load's table timing); 0 when it does not.
	schedule time.Duration
}

// Schedule says the run follows a schedule whose last item is due d after
// the start (blis-load sending on the table's timing): until then the ETA
// of the plain lines is what is left of the schedule, which the rows done
// so far say little about (a load that ramps up, sessions); after it, the
// rows left at the rate so far.
func (p *Progress) Schedule(d time.Duration) {
	if p != nil {
		p.schedule = d
	}
}

// NewProgress returns the progress display for stderr: a bar when stderr
// is a terminal and not quiet, plain lines when force, else nil (off).
func NewProgress(stderr io.Writer, name, unit string, total int64, force, quiet bool) *Progress {
	term := isTerminal(stderr)
	if !(term && !quiet) && !force {
		return nil
	}
	if total <= 0 {
		total = -1
	}
	return &Progress{w: stderr, name: name, unit: unit, total: total, plain: !term, start: time.Now()}
}

// Update records done units and a detail ("simulated 1h02m").
func (p *Progress) Update(done int64, detail string) {
	if p == nil {
		return
	}
	p.done, p.detail = done, detail
	now := time.Now()
	if p.plain {
		if p.last.IsZero() || now.Sub(p.last) >= PlainEvery {
			p.last = now
			fmt.Fprintln(p.w, p.line(now))
		}
		return
	}
	if p.bar == nil {
		if now.Sub(p.start) < 2*time.Second {
			return
		}
		opts := []progressbar.Option{progressbar.OptionSetWriter(p.w), progressbar.OptionShowCount(),
			progressbar.OptionThrottle(200 * time.Millisecond), progressbar.OptionSetItsString(p.unit)}
		if p.total > 0 {
			opts = append(opts, progressbar.OptionSetPredictTime(true), progressbar.OptionShowIts())
		} else {
			opts = append(opts, progressbar.OptionSetElapsedTime(false))
		}
		p.bar = progressbar.NewOptions64(p.total, opts...)
	}
	p.bar.Describe(detail)
	p.bar.Set64(done)
}

// line is a plain progress line.
func (p *Progress) line(now time.Time) string {
	el := now.Sub(p.start)
	s := fmt.Sprintf("%s: %d", p.name, p.done)
	if p.total > 0 {
		s += fmt.Sprintf("/%d %s (%.0f%%)", p.total, p.unit, 100*float64(p.done)/float64(p.total))
	} else {
		s += " " + p.unit
	}
	if p.detail != "" {
		s += ", " + p.detail
	}
	s += ", " + el.Round(time.Second).String() + " elapsed"
	switch {
	case p.total <= 0 || p.done >= p.total:
	case p.schedule > el:
		s += ", ETA " + (p.schedule - el).Round(time.Second).String() + " (the schedule's end)"
	case p.done > 0:
		eta := time.Duration(float64(el) * float64(p.total-p.done) / float64(p.done))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

// Detail sets the detail of the next line without printing one (the last
// line's, before Finish).
func (p *Progress) Detail(detail string) {
	if p != nil {
		p.detail = detail
	}
}

// Finish ends the display: the bar's line is closed; a plain display prints
// its last line.
func (p *Progress) Finish(done int64) {
	if p == nil {
		return
	}
	p.done = done
	if p.plain {
		fmt.Fprintln(p.w, p.line(time.Now()))
		return
	}
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
	}
}
