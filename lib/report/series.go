package report

// maxBins bounds a time series; when time runs past it, neighbouring bins
// merge and the width doubles, so memory stays flat whatever the span.
const maxBins = 2048

// series sums values into fixed-width time bins, starting at t = 0.
type series struct {
	width int64 // µs
	sum   []float64
	bins  int // the most bins kept (0: maxBins)
}

func newSeries() *series { return &series{width: 1000} }

// newSeriesBins is a series that keeps at most n bins (fewer than maxBins
// for the per-replica series, of which there may be thousands).
func newSeriesBins(n int) *series { return &series{width: 1000, bins: n} }

func (s *series) add(t int64, v float64) {
	if t < 0 {
		return
	}
	s.reach(t)
	s.sum[t/s.width] += v
}

// addSpan spreads rate × overlap over the bins that [t, t+dur) covers, so a
// step longer than a bin is not piled into its first bin.
func (s *series) addSpan(t, dur int64, rate float64) {
	if t < 0 || dur <= 0 {
		return
	}
	end := t + dur
	s.reach(end - 1)
	for t < end {
		i := t / s.width
		next := min((i+1)*s.width, end)
		s.sum[i] += rate * float64(next-t)
		t = next
	}
}

// coarsen merges neighbouring bins until at most n remain, for drawing.
func (s *series) coarsen(n int) *series {
	out := &series{width: s.width, sum: append([]float64(nil), s.sum...)}
	for len(out.sum) > n {
		out.merge()
	}
	return out
}

func (s *series) merge() {
	for j := 0; j < len(s.sum); j += 2 {
		x := s.sum[j]
		if j+1 < len(s.sum) {
			x += s.sum[j+1]
		}
		s.sum[j/2] = x
	}
	s.sum = s.sum[:(len(s.sum)+1)/2]
	s.width *= 2
}

// reach makes bin t exist, doubling the width while it lies beyond maxBins.
func (s *series) reach(t int64) {
	i := t / s.width
	limit := int64(maxBins)
	if s.bins > 0 {
		limit = int64(s.bins)
	}
	for i >= limit {
		s.merge()
		i = t / s.width
	}
	for int(i) >= len(s.sum) {
		s.sum = append(s.sum, 0)
	}
}

// at returns the bins at width (a power-of-two multiple of s.width, or
// equal), n of them, zero past the end.
func (s *series) at(width int64, n int) []float64 {
	out := make([]float64, n)
	for j, x := range s.rebin(width) {
		if j < n {
			out[j] += x
		}
	}
	return out
}

// rebin returns the series at the width of other (which must be a power-of-two
// multiple of s.width, or equal), so two series can be divided bin by bin.
func (s *series) rebin(width int64) []float64 {
	if width <= s.width {
		return s.sum
	}
	k := int(width / s.width)
	out := make([]float64, (len(s.sum)+k-1)/k)
	for j, x := range s.sum {
		out[j/k] += x
	}
	return out
}
