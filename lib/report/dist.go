package report

import (
	"math"
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ExactLimit is how many values a distribution keeps exactly before it moves
// them into an HDR histogram. Below it percentiles are exact; above it they
// carry at most hdrRelErr relative error and memory stays flat.
const ExactLimit = 1 << 20

// RunBudget bounds the exact values all distributions of one run hold
// together (8 bytes each, so about 64 MiB). Past it, any distribution holding
// at least minSpill values moves to a histogram on its next value; smaller
// ones stay exact.
const (
	RunBudget = 8 << 20
	minSpill  = 1 << 16
)

// budget counts the exact values held by the distributions of one run.
type budget struct{ used, max int64 }

const (
	hdrSigFigs = 3
	hdrMax     = int64(1) << 40 // µs, about 12.7 days; larger values are clamped into the top bucket
	hdrRelErr  = 0.001
)

// Dist is a distribution of int64 microsecond values: exact (a slice sorted on
// demand) while small, an HDR histogram once it outgrows limit. Count, sum,
// min and max are always exact.
type Dist struct {
	limit    int
	b        *budget
	vals     []int64
	sorted   bool
	h        *hdrhistogram.Histogram
	n        int64
	sum      float64
	min, max int64
}

func newDist(limit int) *Dist { return newDistBudget(limit, nil) }

func newDistBudget(limit int, b *budget) *Dist {
	if limit <= 0 {
		limit = ExactLimit
	}
	return &Dist{limit: limit, b: b, min: math.MaxInt64, max: math.MinInt64}
}

// Add records v (negative values are recorded as 0 in the histogram but kept
// exactly in min/sum).
func (d *Dist) Add(v int64) {
	d.n++
	d.sum += float64(v)
	if v < d.min {
		d.min = v
	}
	if v > d.max {
		d.max = v
	}
	if d.h != nil {
		d.record(v)
		return
	}
	d.vals = append(d.vals, v)
	d.sorted = false
	over := false
	if d.b != nil {
		d.b.used++
		over = d.b.used > d.b.max && len(d.vals) >= minSpill
	}
	if len(d.vals) > d.limit || over {
		d.h = hdrhistogram.New(1, hdrMax, hdrSigFigs)
		for _, x := range d.vals {
			d.record(x)
		}
		if d.b != nil {
			d.b.used -= int64(len(d.vals))
		}
		d.vals = nil
	}
}

func (d *Dist) record(v int64) {
	if v < 0 {
		v = 0
	}
	if v > hdrMax {
		v = hdrMax
	}
	_ = d.h.RecordValue(v) // in range by construction
}

// Count returns the number of values.
func (d *Dist) Count() int64 { return d.n }

// Exact reports whether quantiles are exact.
func (d *Dist) Exact() bool { return d.h == nil }

// Mean returns the arithmetic mean (NaN when empty).
func (d *Dist) Mean() float64 {
	if d.n == 0 {
		return math.NaN()
	}
	return d.sum / float64(d.n)
}

// Max returns the largest value (NaN when empty).
func (d *Dist) Max() float64 {
	if d.n == 0 {
		return math.NaN()
	}
	return float64(d.max)
}

// Quantile returns the nearest-rank q-quantile (0 < q ≤ 1): the smallest value
// with at least q·n values ≤ it. q = 1 is the exact maximum.
func (d *Dist) Quantile(q float64) float64 {
	if d.n == 0 {
		return math.NaN()
	}
	if q >= 1 {
		return float64(d.max)
	}
	if q <= 0 {
		return float64(d.min)
	}
	if d.h != nil {
		v := d.h.ValueAtQuantile(q * 100)
		// The histogram reports a bucket's upper edge; never beyond the true extremes.
		return float64(min(max(v, d.min), d.max))
	}
	if !d.sorted {
		slices.Sort(d.vals)
		d.sorted = true
	}
	rank := int(math.Ceil(q*float64(d.n))) - 1
	rank = min(max(rank, 0), len(d.vals)-1)
	return float64(d.vals[rank])
}
