package summary

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/blis-sim/blis/lib/trace"
)

// Decision is a routing row kept for the worst decisions.
type Decision struct {
	Seq, TimeUS                int64
	RequestID, Tenant, Class   string
	Target, Reason             string
	TTFTUS, RegretUS           int64
	WindowRegretUS             float64
	ExpectedHit, CacheHit      int32
	Waiting, Running, InFlight int32
	KVUtil                     float64
	Candidates                 []trace.Candidate
	hasRegret                  bool
}

// Decisions aggregates a decisions table in bounded memory.
type Decisions struct {
	Path        string
	Rows        int64
	ByKind      map[string]int64
	Reasons     map[string]int64 // routing reasons
	Targets     map[string]int64 // routing targets
	Regret      []float64        // regret_us of sampled rows (ms), in seq order
	WinRegret   []float64        // window_regret_us (ms)
	Worst       []Decision       // by regret (sampled rows) or TTFT, worst first, at most 3
	ByRegret    bool
	Holds       int64 // routing rows with action wait: requests held at the router
	HoldReasons map[string]int64
	Divergent   int64   // routing rows whose expected and actual cache hits differ
	Compared    int64   // routing rows with prefix keys and both values
	WindowUS    int64   // regret replay window (blis.regret_window_us), 0 if unknown
	Sample      float64 // the regret sample asked for (blis.regret_sample), 0 if none
	worstLimit  int
	mine        *miner // every routing row, compactly (pattern mining), or nil
}

// Anomalies aggregates an anomalies table: clusters of (type, replica).
type Anomalies struct {
	Path     string
	Rows     int64
	ByType   map[string]int64
	Clusters []*Cluster
	byKey    map[string]*Cluster
}

// Cluster is the anomalies of one type on one replica (or cluster-wide).
type Cluster struct {
	Type, Replica  string
	Count          int64
	First, Last    int64
	Severity       map[string]int64
	Example        string // the description of its most severe, earliest row
	exampleRank    int
	Requests       int64 // request ids involved (with repeats)
	MagnitudeSum   float64
	MagnitudeCount int64
}

func i64At(a arrow.Array, i int) int64 {
	if a == nil || a.IsNull(i) {
		return trace.Null
	}
	if x, ok := a.(*array.Int64); ok {
		return x.Value(i)
	}
	return trace.Null
}

func i32At(a arrow.Array, i int) int32 {
	if a == nil || a.IsNull(i) {
		return trace.NullI32
	}
	if x, ok := a.(*array.Int32); ok {
		return x.Value(i)
	}
	return trace.NullI32
}

func f64At(a arrow.Array, i int) float64 {
	if a == nil || a.IsNull(i) {
		return math.NaN()
	}
	if x, ok := a.(*array.Float64); ok {
		return x.Value(i)
	}
	return math.NaN()
}

// open opens a table and checks its kind.
func open(path, table string) (*trace.Source, error) {
	src, err := trace.Open(path, nil)
	if err != nil {
		return nil, err
	}
	if got := src.Meta().Table(); got != table {
		src.Close()
		return nil, fmt.Errorf("%s: expected a %s table (blis.table = %s), found %q", path, table, table, got)
	}
	return src, nil
}

func col(rec arrow.RecordBatch, name string) arrow.Array {
	for i, f := range rec.Schema().Fields() {
		if f.Name == name {
			return rec.Column(i)
		}
	}
	return nil
}

// ReadDecisions aggregates a decisions table.
func ReadDecisions(path string) (*Decisions, error) { return readDecisions(path, false) }

// readDecisions aggregates a decisions table; with mine, it also keeps
// every routing row compactly for pattern mining (memory grows with the
// routing rows: about 40 bytes each).
func readDecisions(path string, mine bool) (*Decisions, error) {
	src, err := open(path, trace.TableDecisions)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	d := &Decisions{Path: path, ByKind: map[string]int64{}, Reasons: map[string]int64{}, Targets: map[string]int64{}, worstLimit: 3}
	if mine {
		d.mine = newMiner()
	}
	d.WindowUS, _ = strconv.ParseInt(src.Meta().Get("blis.regret_window_us"), 10, 64)
	d.Sample, _ = strconv.ParseFloat(src.Meta().Get("blis.regret_sample"), 64)
	var all []Decision // candidates for the worst: kept bounded
	for {
		rec, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		kind, seq, tm, act := col(rec, "kind"), col(rec, "seq"), col(rec, "time_us"), col(rec, "action")
		req, ten, cls, tgt, rsn := col(rec, "request_id"), col(rec, "tenant_id"), col(rec, "slo_class"), col(rec, "target"), col(rec, "reason")
		ttft, reg, wreg := col(rec, "ttft_us"), col(rec, "regret_us"), col(rec, "window_regret_us")
		exp, hit, pbk := col(rec, "expected_cache_hit_tokens"), col(rec, "cache_hit_tokens"), col(rec, "prompt_blocks")
		wt, rn, fl, kvu := col(rec, "waiting"), col(rec, "running"), col(rec, "in_flight"), col(rec, "kv_util")
		cands, _ := col(rec, "candidates").(*array.List)
		tier, status := col(rec, "hit_tier"), col(rec, "status")
		filt, _ := col(rec, "filtered").(*array.List)
		if kind == nil || seq == nil {
			rec.Release()
			return nil, fmt.Errorf("%s: not a decisions table: columns kind and seq are required", path)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			d.Rows++
			k := trace.StringAt(kind, i)
			d.ByKind[k]++
			if k != trace.DecisionRouting {
				continue
			}
			if act != nil && trace.StringAt(act, i) == "wait" {
				// A hold: no target and no outcome of its own (the
				// request's route row carries them), so not mined.
				d.Holds++
				if d.HoldReasons == nil {
					d.HoldReasons = map[string]int64{}
				}
				d.HoldReasons[trace.StringAt(rsn, i)]++
				continue
			}
			d.Reasons[trace.StringAt(rsn, i)]++
			d.Targets[trace.StringAt(tgt, i)]++
			e, h := i32At(exp, i), i32At(hit, i)
			if e != trace.NullI32 && h != trace.NullI32 && i32At(pbk, i) > 0 {
				d.Compared++
				if e != h {
					d.Divergent++
				}
			}
			row := Decision{Seq: i64At(seq, i), TimeUS: i64At(tm, i), RequestID: trace.StringAt(req, i), Tenant: trace.StringAt(ten, i), Class: trace.StringAt(cls, i),
				Target: trace.StringAt(tgt, i), Reason: trace.StringAt(rsn, i), TTFTUS: i64At(ttft, i), RegretUS: i64At(reg, i), WindowRegretUS: f64At(wreg, i),
				ExpectedHit: e, CacheHit: h, Waiting: i32At(wt, i), Running: i32At(rn, i), InFlight: i32At(fl, i), KVUtil: f64At(kvu, i)}
			row.hasRegret = row.RegretUS != trace.Null
			if row.hasRegret {
				d.Regret = append(d.Regret, float64(row.RegretUS)/1000)
				if !math.IsNaN(row.WindowRegretUS) {
					d.WinRegret = append(d.WinRegret, row.WindowRegretUS/1000)
				}
			}
			if d.mine != nil {
				if cands != nil && !cands.IsNull(i) {
					row.Candidates = readCands(cands, i)
				}
				nf := 0
				if filt != nil && !filt.IsNull(i) {
					s, e := filt.ValueOffsets(i)
					nf = int(e - s)
				}
				d.mine.add(&row, trace.StringAt(tier, i), trace.StringAt(status, i), i32At(pbk, i), nf)
			}
			if row.TTFTUS == trace.Null && !row.hasRegret {
				continue
			}
			if row.Candidates == nil && cands != nil && !cands.IsNull(i) {
				row.Candidates = readCands(cands, i)
			}
			all = append(all, row)
			if len(all) > 64 {
				all = d.keepWorst(all)
			}
		}
		rec.Release()
	}
	d.Worst = d.keepWorst(all)
	return d, nil
}

// keepWorst keeps the worst rows: by regret when any row was sampled,
// else by TTFT; ties by seq.
func (d *Decisions) keepWorst(rows []Decision) []Decision {
	if len(d.Regret) > 0 {
		d.ByRegret = true
	}
	key := func(r *Decision) (bool, int64) {
		if d.ByRegret {
			return r.hasRegret, r.RegretUS
		}
		return r.TTFTUS != trace.Null, r.TTFTUS
	}
	sort.SliceStable(rows, func(a, b int) bool {
		oa, va := key(&rows[a])
		ob, vb := key(&rows[b])
		if oa != ob {
			return oa
		}
		if va != vb {
			return va > vb
		}
		return rows[a].Seq < rows[b].Seq
	})
	n := d.worstLimit
	for n > 0 && n <= len(rows) {
		if ok, _ := key(&rows[n-1]); ok {
			break
		}
		n--
	}
	return append([]Decision(nil), rows[:min(n, len(rows))]...)
}

func readCands(l *array.List, i int) []trace.Candidate {
	st, ok := l.ListValues().(*array.Struct)
	if !ok {
		return nil
	}
	start, end := l.ValueOffsets(i)
	f := func(name string) arrow.Array {
		t := st.DataType().(*arrow.StructType)
		if k, ok := t.FieldIdx(name); ok {
			return st.Field(k)
		}
		return nil
	}
	id, sc, w, r, fl, kv, cb, cf, cw := f("replica_id"), f("score"), f("waiting"), f("running"), f("in_flight"), f("kv_util"), f("cached_blocks"), f("cf_ttft_us"), f("cf_window_ttft_us")
	var out []trace.Candidate
	for j := int(start); j < int(end); j++ {
		out = append(out, trace.Candidate{ReplicaID: trace.StringAt(id, j), Score: f64At(sc, j), Waiting: i32At(w, j), Running: i32At(r, j),
			InFlight: i32At(fl, j), KVUtil: f64At(kv, j), CachedBlocks: i32At(cb, j), CFTTFTUS: i64At(cf, j), CFWindowTTFTUS: f64At(cw, j)})
	}
	return out
}

var sevRank = map[string]int{"high": 3, "medium": 2, "low": 1}

// ReadAnomalies aggregates an anomalies table into clusters.
func ReadAnomalies(path string) (*Anomalies, error) {
	src, err := open(path, trace.TableAnomalies)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	a := &Anomalies{Path: path, ByType: map[string]int64{}, byKey: map[string]*Cluster{}}
	for {
		rec, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		typ, tm, end, sev, mag, rep, desc := col(rec, "type"), col(rec, "time_us"), col(rec, "end_us"), col(rec, "severity"), col(rec, "magnitude"), col(rec, "replica_id"), col(rec, "description")
		reqs, _ := col(rec, "request_ids").(*array.List)
		if typ == nil || tm == nil {
			rec.Release()
			return nil, fmt.Errorf("%s: not an anomalies table: columns type and time_us are required", path)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			a.Rows++
			t, r := trace.StringAt(typ, i), trace.StringAt(rep, i)
			a.ByType[t]++
			k := t + "\x00" + r
			c := a.byKey[k]
			if c == nil {
				c = &Cluster{Type: t, Replica: r, First: i64At(tm, i), Last: i64At(end, i), Severity: map[string]int64{}}
				a.byKey[k] = c
				a.Clusters = append(a.Clusters, c)
			}
			c.Count++
			c.First = min(c.First, i64At(tm, i))
			c.Last = max(c.Last, i64At(end, i))
			s := trace.StringAt(sev, i)
			c.Severity[s]++
			if sevRank[s] > c.exampleRank {
				c.exampleRank, c.Example = sevRank[s], trace.StringAt(desc, i)
			}
			if m := f64At(mag, i); !math.IsNaN(m) {
				c.MagnitudeSum += m
				c.MagnitudeCount++
			}
			if reqs != nil && !reqs.IsNull(i) {
				s, e := reqs.ValueOffsets(i)
				c.Requests += e - s
			}
		}
		rec.Release()
	}
	return a, nil
}

// weight orders clusters: count weighted by severity.
func (c *Cluster) weight() int64 {
	return c.Severity["high"]*4 + c.Severity["medium"]*2 + c.Severity["low"]
}

// Top returns the n heaviest clusters, ties by type then replica.
func (a *Anomalies) Top(n int) []*Cluster {
	cs := append([]*Cluster(nil), a.Clusters...)
	sort.SliceStable(cs, func(i, j int) bool {
		if wi, wj := cs[i].weight(), cs[j].weight(); wi != wj {
			return wi > wj
		}
		if cs[i].Type != cs[j].Type {
			return cs[i].Type < cs[j].Type
		}
		return cs[i].Replica < cs[j].Replica
	})
	return cs[:min(n, len(cs))]
}
