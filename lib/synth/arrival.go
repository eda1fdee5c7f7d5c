package synth

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"
)

// arrivals generates one client's root arrival times (µs). Gaps are drawn in
// operational time (mean 1/rate) and mapped through the load profile's
// cumulative multiplier, so a profile scales the rate without changing the
// process's shape (its CV).
type arrivals struct {
	kind    string
	rate    float64 // per second
	shape   float64 // gamma / weibull shape
	scale   float64 // gamma / weibull scale, seconds
	jitter  float64
	profile *Profile
	t       float64 // seconds
	replay  []int64
	speedup float64
	ri      int
	// synchronized: the current burst's times, sorted, and the burst number.
	sync   *Arrival
	buf    []int64
	burst  int64
	burstN int32 // sessions in the latest burst
}

func newArrivals(c *Client, rate float64) *arrivals {
	a := &arrivals{kind: c.Arrival.Process, rate: rate, jitter: c.Arrival.Jitter, profile: c.LoadProfile,
		replay: c.replay, speedup: c.Arrival.Speedup}
	switch a.kind {
	case "synchronized":
		a.sync = c.Arrival
	case "gamma":
		cv := *c.Arrival.CV
		a.shape = 1 / (cv * cv)
		a.scale = 1 / (rate * a.shape)
	case "weibull":
		a.shape = weibullShape(*c.Arrival.CV)
		a.scale = 1 / (rate * math.Gamma(1+1/a.shape))
	}
	return a
}

// weibullShape solves CV(k) = cv for the Weibull shape k by bisection on log k
// (CV decreases monotonically in k).
func weibullShape(cv float64) float64 {
	cvOf := func(k float64) float64 {
		lg2, _ := math.Lgamma(1 + 2/k)
		lg1, _ := math.Lgamma(1 + 1/k)
		return math.Sqrt(math.Exp(lg2-2*lg1) - 1)
	}
	lo, hi := math.Log(0.02), math.Log(200.0)
	for i := 0; i < 200; i++ {
		mid := (lo + hi) / 2
		if cvOf(math.Exp(mid)) > cv {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Exp((lo + hi) / 2)
}

// next returns the next arrival in µs, or false when the process has ended.
func (a *arrivals) next(g rng) (int64, bool) {
	if a.kind == "replay" {
		if a.ri >= len(a.replay) {
			return 0, false
		}
		t := a.replay[a.ri]
		a.ri++
		return int64(math.Round(float64(t) / a.speedup)), true
	}
	if a.sync != nil {
		return a.nextSync(g)
	}
	var gap float64
	switch a.kind {
	case "poisson":
		gap = g.r.ExpFloat64() / a.rate
	case "gamma":
		gap = distuv.Gamma{Alpha: a.shape, Beta: 1 / a.scale, Src: g.src}.Rand()
	case "weibull":
		gap = distuv.Weibull{K: a.shape, Lambda: a.scale, Src: g.src}.Rand()
	case "constant":
		gap = (1 + a.jitter*(2*g.r.Float64()-1)) / a.rate
	}
	if a.profile == nil {
		a.t += gap
	} else {
		a.t = a.profile.advance(a.t, gap)
	}
	if math.IsInf(a.t, 1) || a.t > 1e12 {
		return 0, false
	}
	return int64(a.t * 1e6), true
}

// nextSync returns the next arrival of a synchronized client: burst k
// starts at offset + k·period on the spec's clock (the same for every
// client with the same period and offset), its burst_size sessions spread
// uniformly over [start, start+spread).
func (a *arrivals) nextSync(g rng) (int64, bool) {
	for empty := 0; len(a.buf) == 0; empty++ {
		sa := a.sync
		start := int64(sa.Offset) + a.burst*int64(sa.Period)
		if empty > 100000 || start > 1e18 {
			return 0, false // burst_size keeps drawing 0: the client has ended
		}
		a.burst++
		n := int(math.Round(sa.BurstSize.Sample(g)))
		n = max(0, min(n, 1_000_000))
		for i := 0; i < n; i++ {
			var d int64
			if sa.Spread > 0 {
				d = g.r.Int64N(int64(sa.Spread))
			}
			a.buf = append(a.buf, start+d)
		}
		a.burstN = int32(n)
		slices.Sort(a.buf)
		slices.Reverse(a.buf) // pop from the end
	}
	t := a.buf[len(a.buf)-1]
	a.buf = a.buf[:len(a.buf)-1]
	return t, true
}

// profileResolution is the number of constant pieces a ramp (over its
// length) or a diurnal cycle (over its period) is cut into.
const profileResolution = 1000

// piece returns the multiplier at t (seconds) and the end of the interval on
// which it is treated as constant.
func (p *Profile) piece(t float64) (m, end float64) {
	inf := math.Inf(1)
	switch p.Type {
	case "step":
		m, end = 1, inf
		for i, st := range p.Steps {
			if st.At.Seconds() <= t {
				m = st.Multiplier
				end = inf
				if i+1 < len(p.Steps) {
					end = p.Steps[i+1].At.Seconds()
				}
			} else {
				if i == 0 {
					end = st.At.Seconds()
				}
				break
			}
		}
		return m, end
	case "spike":
		at, d := p.At.Seconds(), p.Duration.Seconds()
		switch {
		case t < at:
			return 1, at
		case t < at+d:
			return *p.Multiplier, at + d
		}
		return 1, inf
	case "ramp":
		st, en := p.Start.Seconds(), p.End.Seconds()
		switch {
		case t < st:
			return *p.From, st
		case t >= en:
			return *p.To, inf
		}
		h := (en - st) / profileResolution
		k := math.Floor((t - st) / h)
		if st+(k+1)*h <= t {
			k++
		}
		mid := st + (k+0.5)*h
		return *p.From + (*p.To-*p.From)*(mid-st)/(en-st), math.Min(st+(k+1)*h, en)
	case "diurnal":
		per := p.Period.Seconds()
		h := per / profileResolution
		k := math.Floor(t / h)
		if (k+1)*h <= t {
			k++
		}
		mid := (k + 0.5) * h
		mean, amp := (*p.Max+*p.Min)/2, (*p.Max-*p.Min)/2
		return mean + amp*math.Cos(2*math.Pi*(mid-p.PeakAt.Seconds())/per), (k + 1) * h
	}
	return 1, inf
}

// advance returns the time reached from t after rem seconds of operational
// time (∫ multiplier dt = rem), or +Inf when the multiplier stays 0.
func (p *Profile) advance(t, rem float64) float64 {
	if p.Type == "diurnal" {
		// A whole period integrates to its mean multiplier times the period
		// (the midpoint pieces of the cosine sum to zero), so skip whole periods.
		per := p.Period.Seconds()
		if full := (*p.Max + *p.Min) / 2 * per; rem > full {
			n := math.Floor(rem / full)
			t += n * per
			rem -= n * full
		}
	}
	for i := 0; ; i++ {
		m, end := p.piece(t)
		if !(end > t) || i > 1e6 { // float resolution exhausted: treat as constant
			return t + rem/math.Max(m, 1e-9)
		}
		if m <= 0 {
			if math.IsInf(end, 1) {
				return end
			}
			t = end
			continue
		}
		if math.IsInf(end, 1) || m*(end-t) >= rem {
			return t + rem/m
		}
		rem -= m * (end - t)
		t = end
	}
}

var timeLayouts = []string{
	"2006-01-02 15:04:05.999999999",
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999Z07:00",
	"2006-01-02T15:04:05.999999999",
}

// readTimes reads a replayed trace's timestamp column: numbers (in unit) or
// date-times; returned as µs after the earliest, sorted.
func (s *Spec) readTimes(a *Arrival, p path, cn string) ([]int64, error) {
	full := s.resolve(a.Path)
	mult := 1e6
	switch a.Unit {
	case "", "s":
	case "ms":
		mult = 1e3
	case "us":
		mult = 1
	default:
		return nil, s.errAt(p, "%s: arrival unit: expected s, ms or us, found %q", cn, a.Unit)
	}
	ts, err := readCSVColumn(full, a.Column, func(v string, line int) (int64, error) {
		v = strings.TrimSpace(v)
		// Within ±1e17 µs (about 3,000 years) so differences cannot overflow.
		if f, err := strconv.ParseFloat(v, 64); err == nil && finite(f) {
			if math.Abs(f*mult) > 1e17 {
				return 0, fmt.Errorf("%s:%d: column %s: timestamp %q is out of range", full, line, a.Column, v)
			}
			return int64(math.Round(f * mult)), nil
		}
		for _, l := range timeLayouts {
			if t, err := time.Parse(l, v); err == nil && t.Year() > 0 && t.Year() < 5000 {
				return t.UnixMicro(), nil
			}
		}
		return 0, fmt.Errorf("%s:%d: column %s: expected a number or a date-time, found %q", full, line, a.Column, v)
	})
	if err != nil {
		return nil, s.errAt(p, "%s: replay: %v", cn, err)
	}
	if len(ts) == 0 {
		return nil, s.errAt(p, "%s: replay: %s has no rows", cn, full)
	}
	slices.Sort(ts)
	t0 := ts[0]
	for i := range ts {
		ts[i] -= t0
	}
	s.Inputs = append(s.Inputs, full)
	return ts, nil
}
