package fit

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Report is the human-readable account of a fit or an evaluation.
type Report struct {
	Title     string
	Notes     []string // inputs, filters, counts of skipped rows
	Coef      []CoefRow
	Train     []Stat
	Test      []Stat
	Residuals []Residual // per test point (or train when no test set)
	Warnings  []string
}

// CoefRow is one fitted coefficient.
type CoefRow struct {
	Name, Unit string
	Value      float64
	Note       string // "at bound", "held"
}

// Residual is one row of the residual table.
type Residual struct {
	Label string
	Cols  []Pair // one per statistic, same order as ResidualNames
}

func newTable(w io.Writer, header []string, rightFrom int) *tablewriter.Table {
	align := make(tw.Alignment, len(header))
	for j := range header {
		align[j] = tw.AlignLeft
		if j >= rightFrom {
			align[j] = tw.AlignRight
		}
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithAlignment(align))
	t.Header(toAny(header)...)
	return t
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Write renders the report; residualNames labels the residual columns.
func (r *Report) Write(w io.Writer, residualNames []string, maxResiduals int) error {
	fmt.Fprintf(w, "%s\n", r.Title)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	if len(r.Coef) > 0 {
		fmt.Fprintln(w, "\nCoefficients")
		t := newTable(w, []string{"term", "value", "unit", "note"}, 1)
		for _, c := range r.Coef {
			if err := t.Append([]string{c.Name, fmt.Sprintf("%.6g", c.Value), c.Unit, c.Note}); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	for _, part := range []struct {
		name  string
		stats []Stat
	}{{"Train", r.Train}, {"Test", r.Test}} {
		if len(part.stats) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s error\n", part.name)
		t := newTable(w, []string{"statistic", "points", "MAPE %", "median APE %", "bias %", "Pearson r", "grade"}, 1)
		for _, s := range part.stats {
			if err := t.Append([]string{s.Name, fmt.Sprint(s.N), fmt.Sprintf("%.2f", s.MAPE), fmt.Sprintf("%.2f", s.MedAPE),
				fmt.Sprintf("%+.2f", s.Bias), pearson(s), Grade(s.MAPE)}); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
		for _, s := range part.stats {
			if len(s.Worst) == 0 {
				continue
			}
			fmt.Fprintf(w, "worst %s (%s):\n", strings.ToLower(part.name), s.Name)
			for _, p := range s.Worst {
				fmt.Fprintf(w, "  %+7.1f%%  measured %.6g  predicted %.6g  %s\n", 100*p.RelErr(), p.Measured, p.Predicted, p.Label)
			}
		}
	}
	if len(r.Residuals) > 0 {
		fmt.Fprintln(w, "\nResiduals (µs)")
		hdr := []string{"point"}
		for _, n := range residualNames {
			hdr = append(hdr, n+" measured", n+" predicted", n+" err %")
		}
		t := newTable(w, hdr, 1)
		for i, res := range r.Residuals {
			if maxResiduals > 0 && i >= maxResiduals {
				break
			}
			row := []string{res.Label}
			for _, p := range res.Cols {
				row = append(row, fmt.Sprintf("%.0f", p.Measured), fmt.Sprintf("%.0f", p.Predicted), fmt.Sprintf("%+.1f", 100*p.RelErr()))
			}
			if err := t.Append(row); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
		if maxResiduals > 0 && len(r.Residuals) > maxResiduals {
			fmt.Fprintf(w, "(%d more rows; --residuals 0 shows all)\n", len(r.Residuals)-maxResiduals)
		}
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings")
		for _, s := range r.Warnings {
			fmt.Fprintf(w, "  ! %s\n", s)
		}
	}
	return nil
}

// pearson is blank below 3 points, where a correlation means nothing, and
// when either series is constant (undefined).
func pearson(s Stat) string {
	if s.N < 3 || math.IsNaN(s.Pearson) {
		return "n/a"
	}
	return fmt.Sprintf("%.4f", s.Pearson)
}
