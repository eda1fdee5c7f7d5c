package bundle

import (
	"maps"

	"github.com/blis-sim/blis/lib/engine/row"
)

// Tracker is the router's own state that views expose beyond the replicas'
// status: per tenant and global arrival and completion counts and rates,
// and per replica recent latencies and cache hit rates. It hears arrivals
// and admissions from the router stages and finished requests through
// cluster.Policies.OnResult, all in simulated-time order.
//
// With a snapshot interval, what policies read is a copy taken at each
// interval boundary (as of just before the first event at or after it),
// like the replicas' status: stale views are the point.
type Tracker struct {
	snap, next, now int64
	// start is the time of the first arrival heard (rate windows cover at
	// most the time since), started whether there was one.
	start   int64
	started bool

	tenants map[string]*tenantLive
	reps    map[string]*replicaStats
	g       globalLive
	delayed map[string]struct{}

	// published copies (snapshot interval > 0)
	pubT map[string]*tenantStats
	pubR map[string]*replicaStats
	pubG globalStats

	tscratch tenantStats
	gscratch globalStats
	zeroR    replicaStats
}

// NewTracker returns a tracker publishing every snapshotUS (0 = live).
func NewTracker(snapshotUS int64) *Tracker {
	return &Tracker{snap: snapshotUS, next: snapshotUS, tenants: map[string]*tenantLive{},
		reps: map[string]*replicaStats{}, delayed: map[string]struct{}{},
		pubT: map[string]*tenantStats{}, pubR: map[string]*replicaStats{}}
}

// window counts events in one-second buckets over the last 10 seconds.
// Its rate divides by the time the buckets cover, not by 10 s: at the start
// of a run, or of a router's life, fewer seconds have passed, and dividing
// by 10 made a steady tenant look ten times slower than it was (and its
// first second a burst).
type window struct {
	sec int64
	b   [10]int64
}

func (w *window) add(t int64) {
	s := t / 1e6
	if s > w.sec {
		if s-w.sec >= 10 {
			w.b = [10]int64{}
		} else {
			for k := w.sec + 1; k <= s; k++ {
				w.b[k%10] = 0
			}
		}
		w.sec = s
	}
	w.b[s%10]++
}

// rate is the events of the 10 one-second buckets ending with the current
// one, per second of the time they cover: from the older of the window's
// start ((s-9) s) and start (the tracker's first event) to t, at least 1 s
// (so that the first events are not divided by almost nothing).
func (w *window) rate(t, start int64) float64 {
	s := t / 1e6
	var n int64
	for k := max(w.sec-9, s-9, 0); k <= min(w.sec, s); k++ {
		n += w.b[k%10]
	}
	span := t - max((s-9)*1e6, start)
	return float64(n) / (float64(max(span, 1e6)) / 1e6)
}

func (w *window) current(t int64) int64 {
	if w.sec == t/1e6 {
		return w.b[w.sec%10]
	}
	return 0
}

type tenantLive struct {
	count, active int64
	w             window
}

type tenantStats struct {
	count, active int64
	rate          float64
	burst         bool
}

type globalLive struct {
	count, active, completed int64
	arr, done                window
}

type globalStats struct {
	count, active, completed int64
	rate, throughput         float64
}

type replicaStats struct {
	hit, ttft, tpot, wait float64
	n                     int64
}

func (l *tenantLive) stats(t, start int64, out *tenantStats) {
	out.count, out.active = l.count, l.active
	out.rate = l.w.rate(t, start)
	c := l.w.current(t)
	out.burst = c >= 5 && float64(c) >= 3*out.rate
}

func (g *globalLive) stats(t, start int64, out *globalStats) {
	out.count, out.active, out.completed = g.count, g.active, g.completed
	out.rate, out.throughput = g.arr.rate(t, start), g.done.rate(t, start)
}

// advance publishes the snapshot due before an event at now.
func (t *Tracker) advance(now int64) {
	if now > t.now {
		t.now = now
	}
	if t.snap <= 0 || now < t.next {
		return
	}
	m := now - now%t.snap
	t.next = m + t.snap
	// Sorted iteration is not needed: every entry is copied independently.
	for id, l := range t.tenants {
		p := t.pubT[id]
		if p == nil {
			p = &tenantStats{}
			t.pubT[id] = p
		}
		l.stats(m, t.start, p)
	}
	for id, r := range t.reps {
		p := t.pubR[id]
		if p == nil {
			p = &replicaStats{}
			t.pubR[id] = p
		}
		*p = *r
	}
	t.g.stats(m, t.start, &t.pubG)
}

func (t *Tracker) tenantLive(id string) *tenantLive {
	l := t.tenants[id]
	if l == nil {
		l = &tenantLive{}
		t.tenants[id] = l
	}
	return l
}

// arrived records a request's arrival at now (not a re-arrival after an
// admission delay).
func (t *Tracker) arrived(id, tenant string, now int64) {
	t.advance(now)
	if !t.started {
		t.start, t.started = now, true
	}
	if _, ok := t.delayed[id]; ok {
		delete(t.delayed, id)
		return
	}
	l := t.tenantLive(tenant)
	l.count++
	l.w.add(now)
	t.g.count++
	t.g.arr.add(now)
}

// decided records an admission verdict.
func (t *Tracker) decided(id, tenant string, admitted, delayed bool) {
	switch {
	case admitted:
		t.tenantLive(tenant).active++
		t.g.active++
	case delayed:
		t.delayed[id] = struct{}{}
	}
}

const ewma = 1.0 / 16

// finished records a request's result.
func (t *Tracker) finished(r *row.Result) {
	at := t.now
	if r.FinishedUS != row.Null && r.FinishedUS > at {
		at = r.FinishedUS
	}
	t.advance(at)
	if r.AdmittedUS != row.Null {
		if l := t.tenants[r.TenantID]; l != nil {
			l.active--
		}
		t.g.active--
	}
	if r.Status != row.StatusCompleted {
		return
	}
	t.g.completed++
	t.g.done.add(at)
	if r.ReplicaID == "" || r.TTFTUS == row.Null {
		return
	}
	s := t.reps[r.ReplicaID]
	if s == nil {
		s = &replicaStats{}
		t.reps[r.ReplicaID] = s
	}
	hit := 0.0
	if r.InputTokens > 0 {
		hit = float64(r.CachedTokens) / float64(r.InputTokens)
	}
	wait := 0.0
	if r.FirstScheduledUS != row.Null && r.EnqueuedUS != row.Null {
		wait = float64(r.FirstScheduledUS - r.EnqueuedUS)
	}
	tpot := s.tpot
	if r.TPOTUS != row.Null {
		tpot = float64(r.TPOTUS)
	}
	if s.n == 0 {
		s.hit, s.ttft, s.tpot, s.wait = hit, float64(r.TTFTUS), tpot, wait
	} else {
		s.hit += ewma * (hit - s.hit)
		s.ttft += ewma * (float64(r.TTFTUS) - s.ttft)
		s.tpot += ewma * (tpot - s.tpot)
		s.wait += ewma * (wait - s.wait)
	}
	s.n++
}

func (t *Tracker) tenant(id string, now int64) *tenantStats {
	t.advance(now)
	if t.snap > 0 {
		if p := t.pubT[id]; p != nil {
			return p
		}
		t.tscratch = tenantStats{}
		return &t.tscratch
	}
	if l := t.tenants[id]; l != nil {
		l.stats(now, t.start, &t.tscratch)
	} else {
		t.tscratch = tenantStats{}
	}
	return &t.tscratch
}

func (t *Tracker) global(now int64) *globalStats {
	t.advance(now)
	if t.snap > 0 {
		return &t.pubG
	}
	t.g.stats(now, t.start, &t.gscratch)
	return &t.gscratch
}

func (t *Tracker) replica(id string, now int64) *replicaStats {
	t.advance(now)
	m := t.reps
	if t.snap > 0 {
		m = t.pubR
	}
	if s := m[id]; s != nil {
		return s
	}
	return &t.zeroR
}

// clone returns an independent copy of the tracker.
func (t *Tracker) clone() *Tracker {
	d := *t
	d.tenants, d.reps = deepCopy(t.tenants), deepCopy(t.reps)
	d.pubT, d.pubR = deepCopy(t.pubT), deepCopy(t.pubR)
	d.delayed = maps.Clone(t.delayed)
	return &d
}

// deepCopy copies a map of pointers to plain structs, values and all.
func deepCopy[V any](m map[string]*V) map[string]*V {
	out := make(map[string]*V, len(m))
	for k, v := range m {
		x := *v
		out[k] = &x
	}
	return out
}
