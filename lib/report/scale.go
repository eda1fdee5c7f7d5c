package report

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

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
	from, to   int32   // decisions (-1 when null)
	replica    string  // lifecycle rows
	reason     string
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
		// Optional: what the replicas-by-state picture needs.
		opt32 := func(c string) *array.Int32 {
			if j := colIndex(s, c); j >= 0 {
				a, _ := rec.Column(j).(*array.Int32)
				return a
			}
			return nil
		}
		optStr := func(c string) arrow.Array {
			if j := colIndex(s, c); j >= 0 {
				return rec.Column(j)
			}
			return nil
		}
		fromC, toC, ridC, rsnC := opt32("from"), opt32("to"), optStr(trace.ColReplicaID), optStr("reason")
		for i := 0; i < int(rec.NumRows()); i++ {
			st.rows++
			for _, a := range []arrow.Array{tm, dep, pool, act, rp, rd, gp} {
				if a.IsNull(i) {
					return nil, &trace.RowError{Path: src.Path, Row: st.rows, Err: fmt.Errorf("a required column is null")}
				}
			}
			r := scaleRow{t: tm.Value(i), deployment: dep.Value(i), pool: pool.Value(i), action: act.Value(i),
				replicas: rp.Value(i), ready: rd.Value(i), gpus: gp.Value(i), price: math.NaN(), from: -1, to: -1}
			if fromC != nil && !fromC.IsNull(i) {
				r.from = fromC.Value(i)
			}
			if toC != nil && !toC.IsNull(i) {
				r.to = toC.Value(i)
			}
			if ridC != nil {
				r.replica = trace.StringAt(ridC, i)
			}
			if rsnC != nil {
				r.reason = trace.StringAt(rsnC, i)
			}
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

// Replica states, in the order they stack.
const (
	stServing = iota
	stWarming
	stProvisioning
	stDraining
	nReplicaStates
)

var replicaStateNames = [nReplicaStates]string{"serving", "warming", "provisioning", "draining"}

// stateRow is a pool's replicas by state from time t on.
type stateRow struct {
	t int64
	n [nReplicaStates]int32
}

// states rebuilds the pool's replicas by state after every row. The table
// gives billed (every state but stopped) and ready (serving + warming)
// counts; an up decision starts to − from replicas provisioning, each
// leaving it at its ready (warming) or serving row, or at a stopped row
// "cancelled while provisioning"; a warming replica is one between its
// ready and serving rows; a down decision drains warming replicas before
// serving ones, highest-numbered first (docs/engine.md, "Lifecycle"), after
// the provisioning ones it cancels. Draining = billed − ready − provisioning.
func (p *scalePool) states() []stateRow {
	var out []stateRow
	prov := int32(0)
	warming := map[string]bool{}
	for i, r := range p.rows {
		switch r.action {
		case trace.ScaleUp:
			if r.from >= 0 && r.to > r.from {
				prov += r.to - r.from
			}
		case trace.ScaleDown:
			if r.from >= 0 && r.to >= 0 && r.from > r.to {
				n := int(r.from - r.to)
				for j := i + 1; j < len(p.rows) && p.rows[j].t == r.t; j++ {
					if p.rows[j].action == trace.ScaleStopped && strings.HasPrefix(p.rows[j].reason, "cancelled while provisioning") {
						n--
					}
				}
				ids := make([]string, 0, len(warming))
				for id := range warming {
					ids = append(ids, id)
				}
				sort.Slice(ids, func(a, b int) bool { return replicaNum(ids[a]) > replicaNum(ids[b]) })
				for _, id := range ids[:max(0, min(n, len(ids)))] {
					delete(warming, id)
				}
			}
		case trace.ScaleReady:
			if !warming[r.replica] {
				prov--
				warming[r.replica] = true
			}
		case trace.ScaleServing:
			if warming[r.replica] {
				delete(warming, r.replica)
			} else {
				prov--
			}
		case trace.ScaleStopped:
			if strings.HasPrefix(r.reason, "cancelled while provisioning") {
				prov--
			} else {
				delete(warming, r.replica)
			}
		}
		prov = max(prov, 0)
		var s stateRow
		s.t = r.t
		warm := min(int32(len(warming)), r.ready)
		s.n[stWarming] = warm
		s.n[stServing] = r.ready - warm
		s.n[stProvisioning] = min(prov, max(r.replicas-r.ready, 0))
		s.n[stDraining] = max(r.replicas-r.ready-s.n[stProvisioning], 0)
		if n := len(out); n > 0 && out[n-1].t == s.t {
			out[n-1] = s
		} else {
			out = append(out, s)
		}
	}
	return out
}

// replicaNum is the n of a replica id "<deployment>/<n>" (-1 if none).
func replicaNum(id string) int {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		if n, err := strconv.Atoi(id[i+1:]); err == nil {
			return n
		}
	}
	return -1
}

// totalStates sums the pools' states over time: one row per distinct time.
func (st *scaleStats) totalStates() []stateRow {
	per := make([][]stateRow, len(st.pools))
	var times []int64
	for i, p := range st.pools {
		per[i] = p.states()
		for _, s := range per[i] {
			times = append(times, s.t)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	out := make([]stateRow, 0, len(times))
	pos := make([]int, len(per))
	for _, t := range times {
		row := stateRow{t: t}
		for i, ps := range per {
			for pos[i]+1 < len(ps) && ps[pos[i]+1].t <= t {
				pos[i]++
			}
			if len(ps) > 0 && ps[pos[i]].t <= t {
				for k := range row.n {
					row.n[k] += ps[pos[i]].n[k]
				}
			}
		}
		out = append(out, row)
	}
	return out
}
