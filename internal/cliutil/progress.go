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
	// notBefore: the run cannot end before this much time has elapsed
	// (blis-load's schedule); the ETA is never shorter.
	notBefore time.Duration
}

// NotBefore says the run cannot end before d has elapsed (the last request
// of a schedule is due then): the ETA of the plain lines is at least what
// is left of d.
func (p *Progress) NotBefore(d time.Duration) {
	if p != nil {
		p.notBefore = d
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
	if p.total > 0 && p.done < p.total && (p.done > 0 || p.notBefore > el) {
		var eta time.Duration
		if p.done > 0 {
			eta = time.Duration(float64(el) * float64(p.total-p.done) / float64(p.done))
		}
		eta = max(eta, p.notBefore-el)
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
