package fitness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Ranking is blis-report --fitness's output: the spec and each run's
// fitness, best first.
type Ranking struct {
	Spec  string   `json:"spec"`
	Front []string `json:"front"`
	Runs  []Result `json:"runs"`
}

// NewRanking orders rs best first.
func NewRanking(spec string, rs []Result) *Ranking {
	rk := &Ranking{Spec: spec, Front: []string{}}
	for _, i := range Order(rs) {
		rk.Runs = append(rk.Runs, rs[i])
		if rs[i].Front {
			rk.Front = append(rk.Front, rs[i].Run)
		}
	}
	return rk
}

func fmtF(v Float) string {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', 4, 64)
}

// WriteJSON writes the ranking as one JSON object.
func (rk *Ranking) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(rk)
}

// WriteText writes the ranking as an aligned table (markdown: a Markdown
// table).
func (rk *Ranking) WriteText(w io.Writer, markdown bool) error {
	cols := []string{"rank", "run", "feasible", "primary"}
	if len(rk.Runs) > 0 {
		for _, o := range rk.Runs[0].Objectives {
			cols = append(cols, o.Metric)
		}
		for _, c := range rk.Runs[0].Checks {
			cols = append(cols, c.Constraint)
		}
	}
	var rows [][]string
	for _, r := range rk.Runs {
		row := []string{strconv.Itoa(r.Rank), r.Run, map[bool]string{true: "yes", false: "no"}[r.Feasible], fmtF(r.Primary)}
		if r.Front {
			row[0] += " (front)"
		}
		for _, o := range r.Objectives {
			row = append(row, fmtF(o.Value))
		}
		for _, c := range r.Checks {
			mark := "✓"
			if !c.Holds {
				mark = "✗"
			}
			row = append(row, mark+" "+fmtF(c.Value))
		}
		rows = append(rows, row)
	}
	if markdown {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nprimary = weighted mean of the objectives normalised as ±value/scale (higher is better); Pareto front: %s\n", strings.Join(rk.Front, ", "))
	return nil
}
