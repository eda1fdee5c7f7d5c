package sweep

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio" // summaries are written as Parquet
)

// Summary is the collected outcome of a plan: every run's record.
type Summary struct {
	Plan    *Plan
	Records map[string]*Record // by run id
	axisCol []colKind
}

type colKind int

const (
	colInt colKind = iota
	colFloat
	colString
)

// Collect reads the record of every run of the plan. It fails, listing what
// is missing, when a run has no record.
func Collect(p *Plan, out string) (*Summary, error) {
	s := &Summary{Plan: p, Records: map[string]*Record{}}
	var missing int
	for _, r := range p.Runs {
		if _, ok := s.Records[r.ID]; ok {
			continue
		}
		rec, err := readRecord(out, r.ID)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			missing++
			continue
		}
		s.Records[r.ID] = rec
	}
	if missing > 0 {
		return nil, &MissingError{Runs: missing, Total: len(p.Runs)}
	}
	if err := s.checkColumns(); err != nil {
		return nil, err
	}
	return s, nil
}

// MissingError says that some runs have no record yet.
type MissingError struct{ Runs, Total int }

func (e *MissingError) Error() string {
	return fmt.Sprintf("%d of %d runs have no result yet", e.Runs, e.Total)
}

// axis column types: integers when every value is an integer, numbers when
// every value is a number, else text (a list or mapping in YAML flow style).
func (s *Summary) checkColumns() error {
	sp := s.Plan.Spec
	fixed := []string{"run_id", "point", "replication", "seed", "group", "status", "error", "latency_model", colGPUs, colCost, "replications", "failed"}
	taken := map[string]bool{}
	for _, c := range fixed {
		taken[c] = true
	}
	for _, m := range Metrics {
		taken[m.Name] = true
		taken[m.Name+"_ci95"] = true
	}
	s.axisCol = make([]colKind, len(sp.Axes))
	for i, a := range sp.Axes {
		if taken[a.Name] {
			return fmt.Errorf("axis %s has the name of a summary column", a.Name)
		}
		k := colInt
		for _, pt := range s.Plan.Points {
			v := pt.Values[i]
			switch {
			case v.Kind == yaml.ScalarNode && v.Tag == "!!int":
				if _, err := strconv.ParseInt(v.Value, 0, 64); err != nil {
					k = colString
				}
			case v.Kind == yaml.ScalarNode && v.Tag == "!!float":
				if _, err := strconv.ParseFloat(v.Value, 64); err != nil {
					k = colString
				} else {
					k = max(k, colFloat)
				}
			default:
				k = colString
			}
		}
		s.axisCol[i] = k
	}
	return nil
}

func (s *Summary) axisFields() []arrow.Field {
	var fs []arrow.Field
	for i, a := range s.Plan.Spec.Axes {
		t := arrow.DataType(arrow.BinaryTypes.String)
		switch s.axisCol[i] {
		case colInt:
			t = arrow.PrimitiveTypes.Int64
		case colFloat:
			t = arrow.PrimitiveTypes.Float64
		}
		fs = append(fs, arrow.Field{Name: a.Name, Type: t, Metadata: arrow.NewMetadata([]string{"blis.axis"}, []string{"true"})})
	}
	return fs
}

func (s *Summary) appendAxis(b array.Builder, i int, v *yaml.Node) {
	switch s.axisCol[i] {
	case colInt:
		n, _ := strconv.ParseInt(v.Value, 0, 64)
		b.(*array.Int64Builder).Append(n)
	case colFloat:
		f, _ := strconv.ParseFloat(v.Value, 64)
		b.(*array.Float64Builder).Append(f)
	default:
		b.(*array.StringBuilder).Append(flowString(v))
	}
}

func unitMeta(unit string) arrow.Metadata {
	return arrow.NewMetadata([]string{"unit"}, []string{unit})
}

// metrics lists the metric columns of this sweep (SLO metrics only with SLOs).
func (s *Summary) metrics() []Metric {
	var ms []Metric
	for _, m := range Metrics {
		if m.slo && len(s.Plan.Spec.Report.SLO) == 0 {
			continue
		}
		ms = append(ms, m)
	}
	return ms
}

func (s *Summary) meta(table string) *arrow.Metadata {
	sp := s.Plan.Spec
	axes := make([]string, len(sp.Axes))
	for i, a := range sp.Axes {
		axes[i] = a.Name
	}
	ab, _ := json.Marshal(axes) // strings: cannot fail
	seed := trace.Stage{Tool: "blis-sweep", Version: trace.Version}
	prov, _ := json.Marshal([]trace.Stage{seed})
	keys := []string{trace.MetaTable, trace.MetaSchemaVersion, report.MetaSweepName, report.MetaSweepAxes,
		report.MetaSweepReplications, report.MetaSweepBy, report.MetaSweepSLO, trace.MetaProvenance}
	slo, _ := json.Marshal(sp.Report.SLO)
	vals := []string{table, trace.SchemaVersion, sp.Name, string(ab), strconv.Itoa(max(1, len(sp.Seeds))),
		sp.Report.By, string(slo), string(prov)}
	md := arrow.NewMetadata(keys, vals)
	return &md
}

func (s *Summary) gpuCost(r *Run) (int64, float64, bool) {
	if r.cluster == nil {
		return 0, math.NaN(), false
	}
	g := r.cluster.gpus()
	var n int64
	cost := 0.0
	priced := s.Plan.Spec.Cost != nil
	for _, name := range gpuNames(g) {
		n += int64(g[name])
		p, ok := s.Plan.Spec.Cost[name]
		if !ok {
			priced = false
		}
		cost += p * float64(g[name])
	}
	if !priced {
		cost = math.NaN()
	}
	return n, cost, true
}

func appendFloat(b *array.Float64Builder, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		b.AppendNull()
		return
	}
	b.Append(v)
}

func appendStr(b *array.StringBuilder, v string) {
	if v == "" {
		b.AppendNull()
		return
	}
	b.Append(v)
}

// RunsTable builds the runs table: one row per run × report group.
func (s *Summary) RunsTable() arrow.RecordBatch {
	sp := s.Plan.Spec
	fs := []arrow.Field{
		{Name: "run_id", Type: arrow.BinaryTypes.String},
		{Name: "point", Type: arrow.PrimitiveTypes.Int64},
		{Name: "replication", Type: arrow.PrimitiveTypes.Int64},
	}
	fs = append(fs, s.axisFields()...)
	hasSeed := len(sp.Seeds) > 0
	if hasSeed {
		fs = append(fs, arrow.Field{Name: "seed", Type: arrow.PrimitiveTypes.Uint64})
	}
	fs = append(fs,
		arrow.Field{Name: "group", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "status", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "error", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "latency_model", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: colGPUs, Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: unitMeta("count")},
	)
	hasCost := sp.Cost != nil
	if hasCost {
		fs = append(fs, arrow.Field{Name: colCost, Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: unitMeta("$/h")})
	}
	ms := s.metrics()
	for _, m := range ms {
		fs = append(fs, arrow.Field{Name: m.Name, Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: unitMeta(m.Unit)})
	}
	schema := arrow.NewSchema(fs, s.meta(report.TableSweepRuns))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range s.Plan.Runs {
		rec := s.Records[r.ID]
		groups := rec.Groups
		if len(groups) == 0 {
			groups = []GroupRecord{{Group: "all"}}
		}
		gpus, cost, ok := s.gpuCost(r)
		for _, g := range groups {
			c := 0
			b.Field(c).(*array.StringBuilder).Append(r.ID)
			b.Field(c + 1).(*array.Int64Builder).Append(int64(r.Point.Index))
			b.Field(c + 2).(*array.Int64Builder).Append(int64(r.Replication))
			c += 3
			for i, v := range r.Point.Values {
				s.appendAxis(b.Field(c), i, v)
				c++
			}
			if hasSeed {
				b.Field(c).(*array.Uint64Builder).Append(r.Seed)
				c++
			}
			b.Field(c).(*array.StringBuilder).Append(g.Group)
			status := "ok"
			if rec.Error != "" {
				status = "failed"
			}
			b.Field(c + 1).(*array.StringBuilder).Append(status)
			appendStr(b.Field(c+2).(*array.StringBuilder), rec.Error)
			appendStr(b.Field(c+3).(*array.StringBuilder), rec.LatencyModel)
			if ok {
				b.Field(c + 4).(*array.Int64Builder).Append(gpus)
			} else {
				b.Field(c + 4).AppendNull()
			}
			c += 5
			if hasCost {
				appendFloat(b.Field(c).(*array.Float64Builder), cost)
				c++
			}
			for _, m := range ms {
				v := math.NaN()
				if p := g.Metrics[m.Name]; p != nil {
					v = *p
				}
				appendFloat(b.Field(c).(*array.Float64Builder), v)
				c++
			}
		}
	}
	return b.NewRecordBatch()
}

// pointGroup gathers one point × group's runs.
type pointGroup struct {
	group  string
	values [][]float64 // per metric: the value of each ok run that has it
	ok     int
}

// PointStats aggregates one point's runs per group: mean and 95% CI.
type PointStats struct {
	Point    *Point
	Group    string
	N        int // ok runs with this group
	Failed   int // runs of the point that failed
	GPUs     int64
	Cost     float64
	Mean     []float64 // per Metrics entry
	CI95     []float64 // half-width of the 95% CI of the mean (NaN when N < 2)
	FirstRun *Run
}

// Points aggregates the runs of every point, group by group, in plan order.
func (s *Summary) Points() []PointStats {
	var out []PointStats
	byPoint := map[*Point][]*Run{}
	var order []*Point
	for _, r := range s.Plan.Runs {
		if _, ok := byPoint[r.Point]; !ok {
			order = append(order, r.Point)
		}
		byPoint[r.Point] = append(byPoint[r.Point], r)
	}
	for _, pt := range order {
		out = append(out, s.aggregate(pt, byPoint[pt])...)
	}
	return out
}

func (s *Summary) aggregate(pt *Point, runs []*Run) []PointStats {
	var groups []*pointGroup
	idx := map[string]*pointGroup{}
	failed := 0
	for _, r := range runs {
		rec := s.Records[r.ID]
		if rec.Error != "" {
			failed++
			continue
		}
		for _, g := range rec.Groups {
			pg := idx[g.Group]
			if pg == nil {
				pg = &pointGroup{group: g.Group, values: make([][]float64, len(Metrics))}
				idx[g.Group] = pg
				groups = append(groups, pg)
			}
			pg.ok++
			for j, m := range Metrics {
				if p := g.Metrics[m.Name]; p != nil {
					pg.values[j] = append(pg.values[j], *p)
				}
			}
		}
	}
	if len(groups) == 0 {
		groups = []*pointGroup{{group: "all", values: make([][]float64, len(Metrics))}}
	}
	gpus, cost, _ := s.gpuCost(runs[0])
	var out []PointStats
	for _, g := range groups {
		ps := PointStats{Point: pt, Group: g.group, N: g.ok, Failed: failed, GPUs: gpus, Cost: cost,
			Mean: make([]float64, len(Metrics)), CI95: make([]float64, len(Metrics)), FirstRun: runs[0]}
		for j := range Metrics {
			ps.Mean[j], ps.CI95[j] = report.MeanCI95(g.values[j])
		}
		out = append(out, ps)
	}
	return out
}

// PointsTable builds the points table: one row per point × group, the mean
// of each metric over the point's replications and its 95% CI half-width.
func (s *Summary) PointsTable() arrow.RecordBatch {
	sp := s.Plan.Spec
	fs := []arrow.Field{{Name: "point", Type: arrow.PrimitiveTypes.Int64}}
	fs = append(fs, s.axisFields()...)
	fs = append(fs,
		arrow.Field{Name: "group", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "replications", Type: arrow.PrimitiveTypes.Int64, Metadata: unitMeta("count")},
		arrow.Field{Name: "failed", Type: arrow.PrimitiveTypes.Int64, Metadata: unitMeta("count")},
		arrow.Field{Name: colGPUs, Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: unitMeta("count")},
	)
	hasCost := sp.Cost != nil
	if hasCost {
		fs = append(fs, arrow.Field{Name: colCost, Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: unitMeta("$/h")})
	}
	ms := s.metrics()
	for _, m := range ms {
		fs = append(fs, arrow.Field{Name: m.Name, Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: unitMeta(m.Unit)},
			arrow.Field{Name: m.Name + "_ci95", Type: arrow.PrimitiveTypes.Float64, Nullable: true, Metadata: unitMeta(m.Unit)})
	}
	schema := arrow.NewSchema(fs, s.meta(report.TableSweepPoints))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, ps := range s.Points() {
		b.Field(0).(*array.Int64Builder).Append(int64(ps.Point.Index))
		c := 1
		for i, v := range ps.Point.Values {
			s.appendAxis(b.Field(c), i, v)
			c++
		}
		b.Field(c).(*array.StringBuilder).Append(ps.Group)
		b.Field(c + 1).(*array.Int64Builder).Append(int64(ps.N))
		b.Field(c + 2).(*array.Int64Builder).Append(int64(ps.Failed))
		if ps.FirstRun.cluster != nil {
			b.Field(c + 3).(*array.Int64Builder).Append(ps.GPUs)
		} else {
			b.Field(c + 3).AppendNull()
		}
		c += 4
		if hasCost {
			appendFloat(b.Field(c).(*array.Float64Builder), ps.Cost)
			c++
		}
		for _, m := range ms {
			j := slices.IndexFunc(Metrics, func(x Metric) bool { return x.Name == m.Name })
			appendFloat(b.Field(c).(*array.Float64Builder), ps.Mean[j])
			appendFloat(b.Field(c+1).(*array.Float64Builder), ps.CI95[j])
			c += 2
		}
	}
	return b.NewRecordBatch()
}

// WriteTable writes a table to path (.parquet, .arrow, or a stream).
func WriteTable(path string, rec arrow.RecordBatch) error {
	sink, err := trace.Create(path, nil, rec.Schema())
	if err != nil {
		return err
	}
	if err := sink.Write(rec); err != nil {
		trace.Abort(sink)
		return err
	}
	return sink.Close()
}

// IdenticalReplications explains, when every point's replications gave the
// same metrics, that the seed changes nothing for this workload and policy
// (a recorded trace replayed without sampling, deterministic policies): the
// CIs are then zero by construction, not by precision.
func (s *Summary) IdenticalReplications() string {
	if len(s.Plan.Spec.Seeds) < 2 {
		return ""
	}
	first := map[*Point]*Record{}
	for _, r := range s.Plan.Runs {
		rec := s.Records[r.ID]
		if rec.Error != "" {
			continue
		}
		f, ok := first[r.Point]
		if !ok {
			first[r.Point] = rec
			continue
		}
		if !sameMetrics(f, rec) {
			return ""
		}
	}
	return fmt.Sprintf("the %d replications of every point gave identical metrics: the seed changes nothing here (a trace replayed without workload.sample, and policies that draw no random numbers); CIs are zero", len(s.Plan.Spec.Seeds))
}

func sameMetrics(a, b *Record) bool {
	if len(a.Groups) != len(b.Groups) {
		return false
	}
	for i := range a.Groups {
		ga, gb := a.Groups[i], b.Groups[i]
		if ga.Group != gb.Group || len(ga.Metrics) != len(gb.Metrics) {
			return false
		}
		for k, v := range ga.Metrics {
			w, ok := gb.Metrics[k]
			if !ok || *v != *w {
				return false
			}
		}
	}
	return true
}
