package report

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/blis-sim/blis/lib/engine/autoscale"
	"github.com/blis-sim/blis/lib/trace"
)

// scaleRow is what the report uses of a scale-events row.
type scaleRow struct {
	t          int64
	deployment string
	pool       int32
	action     string
	replicas   int32
	ready      int32
	gpus       int32
	price      float64 // NaN: not priced
}

// scalePool is one pool's replica timeline.
type scalePool struct {
	deployment string
	pool       int32
	rows       []scaleRow
}

// scaleStats is read from a scale-events table (blis-sim --scale-events).
type scaleStats struct {
	path  string
	rows  int64
	pools []*scalePool
}

var scaleColumns = []string{"time_us", trace.ColDeployment, "pool", "action", "replicas", "ready", "gpus_per_replica", "gpu_hour_usd"}

func readScaleEvents(path string, opt *Options) (*scaleStats, error) {
	src, err := trace.Open(path, opt.Stdin)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := src.Expect(trace.TableScaleEvents); err != nil {
		return nil, err
	}
	s := src.Schema()
	if err := need(src.Path, s, "--scale-events table", scaleColumns...); err != nil {
		return nil, err
	}
	types := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String,
		arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Float64}
	for i, c := range scaleColumns {
		if f := s.Field(colIndex(s, c)); !arrow.TypeEqual(f.Type, types[i]) {
			return nil, fmt.Errorf("%s: column %s: expected %s, found %s", src.Path, c, types[i], f.Type)
		}
	}
	st := &scaleStats{path: src.Path}
	byKey := map[string]*scalePool{}
	for {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		col := func(c string) arrow.Array { return rec.Column(colIndex(s, c)) }
		tm, dep, pool, act := col("time_us").(*array.Int64), col(trace.ColDeployment).(*array.String), col("pool").(*array.Int32), col("action").(*array.String)
		rp, rd, gp, pr := col("replicas").(*array.Int32), col("ready").(*array.Int32), col("gpus_per_replica").(*array.Int32), col("gpu_hour_usd").(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			st.rows++
			for _, a := range []arrow.Array{tm, dep, pool, act, rp, rd, gp} {
				if a.IsNull(i) {
					return nil, &trace.RowError{Path: src.Path, Row: st.rows, Err: fmt.Errorf("a required column is null")}
				}
			}
			r := scaleRow{t: tm.Value(i), deployment: dep.Value(i), pool: pool.Value(i), action: act.Value(i),
				replicas: rp.Value(i), ready: rd.Value(i), gpus: gp.Value(i), price: math.NaN()}
			if !pr.IsNull(i) {
				r.price = pr.Value(i)
			}
			if r.t < 0 || r.replicas < 0 || r.gpus < 0 {
				return nil, &trace.RowError{Path: src.Path, Row: st.rows, Err: fmt.Errorf("columns time_us, replicas, gpus_per_replica: expected >= 0, found %d, %d, %d", r.t, r.replicas, r.gpus)}
			}
			k := fmt.Sprintf("%s\x00%d", r.deployment, r.pool)
			p := byKey[k]
			if p == nil {
				p = &scalePool{deployment: r.deployment, pool: r.pool}
				byKey[k] = p
				st.pools = append(st.pools, p)
			}
			if n := len(p.rows); n > 0 && p.rows[n-1].t > r.t {
				return nil, &trace.RowError{Path: src.Path, Row: st.rows, Err: fmt.Errorf("column time_us: %d comes after %d for pool %s/%d: expected time order", r.t, p.rows[n-1].t, r.deployment, r.pool)}
			}
			p.rows = append(p.rows, r)
		}
	}
	sort.SliceStable(st.pools, func(i, j int) bool {
		a, b := st.pools[i], st.pools[j]
		return a.deployment < b.deployment || a.deployment == b.deployment && a.pool < b.pool
	})
	return st, nil
}

// ScaleUsage is one pool's replica usage over a run.
type ScaleUsage struct {
	GPUHours, ReplicaHours   float64
	MinReplicas, MaxReplicas int32
	Ups, Downs               int
	CostUSD                  float64 // NaN when the pool has no price
	Oscillations             []autoscale.Oscillation
}

// usage integrates the pool's billed replicas over time: each row holds
// the count after it, until the next row (the last row is the run's end).
func (p *scalePool) usage(windowUS int64) ScaleUsage {
	u := ScaleUsage{MinReplicas: math.MaxInt32, CostUSD: math.NaN()}
	var acts []autoscale.Action
	for i, r := range p.rows {
		u.MinReplicas, u.MaxReplicas = min(u.MinReplicas, r.replicas), max(u.MaxReplicas, r.replicas)
		switch r.action {
		case trace.ScaleUp:
			u.Ups++
			acts = append(acts, autoscale.Action{TimeUS: r.t, Up: true})
		case trace.ScaleDown:
			u.Downs++
			acts = append(acts, autoscale.Action{TimeUS: r.t, Up: false})
		}
		if i+1 < len(p.rows) {
			dt := float64(p.rows[i+1].t-r.t) / 3.6e9
			u.ReplicaHours += float64(r.replicas) * dt
			g := float64(r.replicas) * float64(r.gpus) * dt
			u.GPUHours += g
			if !math.IsNaN(r.price) {
				if math.IsNaN(u.CostUSD) {
					u.CostUSD = 0
				}
				u.CostUSD += g * r.price
			}
		}
	}
	if len(p.rows) == 0 {
		u.MinReplicas = 0
	}
	u.Oscillations = autoscale.Oscillations(acts, windowUS)
	return u
}

// scaleTable adds the autoscaling table, its oscillation notes, and
// returns nothing when no scale-events table was given.
func (rep *Report) scaleTable() {
	st := rep.scale
	if st == nil {
		return
	}
	t := &Table{Name: "autoscaling", Title: "Replicas, GPU-hours and cost",
		Note: "from the scale-events table: replicas billed (every state but stopped: provisioning, warming, serving, draining) integrated over the run; " +
			"cost = GPU-hours × gpu_hour_usd (the deployment's price in the cluster config; '-' when not set)",
		Columns: []string{"deployment", "pool", "scale_ups", "scale_downs", "min_replicas", "max_replicas", "mean_replicas", "gpu_hours", "cost_usd", "oscillations"}}
	for _, p := range st.pools {
		u := p.usage(autoscale.DefaultOscillationWindowUS)
		span := 0.0
		if n := len(p.rows); n > 1 {
			span = float64(p.rows[n-1].t-p.rows[0].t) / 3.6e9
		}
		mean := math.NaN()
		if span > 0 {
			mean = u.ReplicaHours / span
		}
		t.add(txt(p.deployment), integer(int64(p.pool)), integer(int64(u.Ups)), integer(int64(u.Downs)), integer(int64(u.MinReplicas)),
			integer(int64(u.MaxReplicas)), num(mean, 2), num(u.GPUHours, 3), num(u.CostUSD, 2), integer(int64(len(u.Oscillations))))
		for _, o := range u.Oscillations {
			pattern := "up, down, up"
			if !o.FirstUp {
				pattern = "down, up, down"
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("scale_oscillation: pool %s/%d scaled %s between %.0f s and %.0f s (within %.0f s)",
				p.deployment, p.pool, pattern, float64(o.StartUS)/1e6, float64(o.EndUS)/1e6, float64(autoscale.DefaultOscillationWindowUS)/1e6))
		}
	}
	rep.Tables = append(rep.Tables, t)
}

// scaleLines are the replica step lines of each pool (billed and ready).
func (st *scaleStats) lines() []line {
	var out []line
	for _, p := range st.pools {
		name := fmt.Sprintf("%s/%d", p.deployment, p.pool)
		billed, ready := line{name: name + " replicas"}, line{name: name + " ready"}
		for _, r := range p.rows {
			billed.xs, billed.ys = append(billed.xs, float64(r.t)/1e6), append(billed.ys, float64(r.replicas))
			ready.xs, ready.ys = append(ready.xs, float64(r.t)/1e6), append(ready.ys, float64(r.ready))
		}
		out = append(out, billed, ready)
	}
	return out
}
