package report

import (
	"errors"
	"fmt"
	"io"

	"github.com/blis-sim/blis/lib/trace"
)

var stepColumns = []string{trace.ColInstanceID, trace.ColStartUS, trace.ColDurationUS, trace.ColBatchSize,
	trace.ColWaiting, trace.ColRunning, trace.ColKVBlocksUsed, trace.ColKVBlocksTotal}

// instSteps is one instance's engine activity.
type instSteps struct {
	steps, busy, batch, waitDur int64
	maxWaiting                  int64
	prefill, decode             int64 // tokens (when the table has the columns)
	offloads, reloads           int64 // lower-tier blocks (when the table has the columns)
}

// stepStats is read from a steps table. Series hold duration-weighted sums so
// that dividing by the bin width gives a time average.
type stepStats struct {
	path                       string
	rows                       int64
	end                        int64 // latest step end, µs
	waiting, running, kvU, kvT *series
	inst                       map[int64]*instSteps
	role                       map[int64]string // pool role per instance (role column; P/D runs)
	// Per instance, for the heat strips (Options.Charts): duration-weighted
	// sums like the series above, in fewer bins.
	heat map[int64]*instHeat
}

// instHeatBins bounds each instance's series: 1,000 replicas × 5 series ×
// 256 bins is 10 MB.
const instHeatBins = 256

type instHeat struct {
	name                      string // replica_id
	busy, run, wait, kvU, kvT *series
}

func readSteps(path string, opt *Options) (*stepStats, error) {
	src, err := trace.Open(path, opt.Stdin)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := src.Expect(trace.TableSteps); err != nil {
		return nil, err
	}
	s := src.Schema()
	if err := need(src.Path, s, "--steps charts", stepColumns...); err != nil {
		return nil, err
	}
	for _, c := range stepColumns {
		if err := checkInt(src.Path, s, c); err != nil {
			return nil, err
		}
	}
	st := &stepStats{path: src.Path, waiting: newSeries(), running: newSeries(), kvU: newSeries(), kvT: newSeries(),
		inst: map[int64]*instSteps{}}
	var c [8]icol
	var pre, dec, off, rel icol
	role, rid := newStrKey(), newStrKey()
	if err := checkStr(src.Path, s, trace.ColRole); err != nil {
		return nil, err
	}
	if err := checkStr(src.Path, s, trace.ColReplicaID); err != nil {
		return nil, err
	}
	if opt.Charts {
		st.heat = map[int64]*instHeat{}
	}
	for {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if err != nil {
			return nil, err
		}
		for j, name := range stepColumns {
			c[j].bind(rec, colIndex(s, name))
		}
		pre.bind(rec, colIndex(s, trace.ColPrefillTokens))
		dec.bind(rec, colIndex(s, trace.ColDecodeTokens))
		off.bind(rec, colIndex(s, trace.ColKVOffloads))
		rel.bind(rec, colIndex(s, trace.ColKVReloads))
		role.bind(rec, colIndex(s, trace.ColRole))
		if st.heat != nil {
			rid.bind(rec, colIndex(s, trace.ColReplicaID))
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			st.rows++
			var v [8]int64
			for j := range c {
				x, ok := c[j].get(i)
				if !ok {
					return nil, &trace.RowError{Path: src.Path, Row: st.rows, Err: fmt.Errorf("column %s: expected a value, found null", stepColumns[j])}
				}
				v[j] = x
			}
			id, start, dur := v[0], v[1], v[2]
			if dur < 0 || start < 0 {
				return nil, &trace.RowError{Path: src.Path, Row: st.rows, Err: fmt.Errorf("columns %s/%s: expected >= 0, found %d/%d", trace.ColStartUS, trace.ColDurationUS, start, dur)}
			}
			in := st.inst[id]
			if in == nil {
				in = &instSteps{}
				st.inst[id] = in
			}
			st.end = max(st.end, start+dur)
			in.steps++
			in.busy += dur
			in.batch += v[3]
			in.waitDur += v[4] * dur
			in.maxWaiting = max(in.maxWaiting, v[4])
			in.prefill += pre.or(i, 0)
			in.decode += dec.or(i, 0)
			in.offloads += off.or(i, 0)
			in.reloads += rel.or(i, 0)
			if rc := role.code(i); rc >= 0 && in.steps == 1 {
				if st.role == nil {
					st.role = map[int64]string{}
				}
				st.role[id] = role.names[rc]
			}
			st.waiting.addSpan(start, dur, float64(v[4]))
			st.running.addSpan(start, dur, float64(v[5]))
			st.kvU.addSpan(start, dur, float64(v[6]))
			st.kvT.addSpan(start, dur, float64(v[7]))
			if st.heat != nil {
				h := st.heat[id]
				if h == nil {
					h = &instHeat{busy: newSeriesBins(instHeatBins), run: newSeriesBins(instHeatBins), wait: newSeriesBins(instHeatBins),
						kvU: newSeriesBins(instHeatBins), kvT: newSeriesBins(instHeatBins)}
					if c := rid.code(i); c >= 0 {
						h.name = rid.names[c]
					}
					st.heat[id] = h
				}
				h.busy.addSpan(start, dur, 1)
				h.run.addSpan(start, dur, float64(v[5]))
				h.wait.addSpan(start, dur, float64(v[4]))
				h.kvU.addSpan(start, dur, float64(v[6]))
				h.kvT.addSpan(start, dur, float64(v[7]))
			}
		}
	}
}
