package report

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Cell is one table value: text, or a number printed with a fixed number of
// decimals (NaN prints as "-" and as JSON null).
type Cell struct {
	Text  string
	Num   float64
	Prec  int
	IsNum bool
}

func txt(s string) Cell            { return Cell{Text: s} }
func num(v float64, prec int) Cell { return Cell{Num: v, Prec: prec, IsNum: true} }
func integer(v int64) Cell         { return Cell{Num: float64(v), IsNum: true} }
func ms(us float64) Cell           { return num(us/1000, 3) }
func pct(part, whole float64) Cell { return num(ratio(part, whole)*100, 2) }
func ratio(part, whole float64) float64 {
	if whole == 0 {
		return math.NaN()
	}
	return part / whole
}

// String formats the cell for text outputs.
func (c Cell) String() string {
	if !c.IsNum {
		return c.Text
	}
	if math.IsNaN(c.Num) || math.IsInf(c.Num, 0) {
		return "-"
	}
	return fixed(c.Num, c.Prec)
}

// fixed formats v with prec decimals, never as "-0.00": a tiny negative
// difference that rounds to zero is zero.
func fixed(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if s[0] == '-' && strings.Trim(s[1:], "0.") == "" {
		return s[1:]
	}
	return s
}

func (c Cell) json() string {
	if !c.IsNum {
		return strconv.Quote(c.Text)
	}
	if math.IsNaN(c.Num) || math.IsInf(c.Num, 0) {
		return "null"
	}
	return fixed(c.Num, c.Prec)
}

// Table is one titled table of the report. Name is a stable machine key.
type Table struct {
	Name    string
	Title   string
	Note    string // one line under the title: which rows count, units
	Columns []string
	Rows    [][]Cell
	// Header tables (the run's configuration) come first in every format,
	// before the charts in HTML.
	Header bool
}

func (t *Table) add(cells ...Cell) { t.Rows = append(t.Rows, cells) }

// numeric reports whether column j holds numbers (for right alignment).
func (t *Table) numeric(j int) bool {
	for _, r := range t.Rows {
		if j < len(r) && r[j].IsNum {
			return true
		}
	}
	return false
}

// Format names an output format.
type Format string

// Output formats.
const (
	FormatTable    Format = "table"
	FormatMarkdown Format = "markdown"
	FormatCSV      Format = "csv"
	FormatJSON     Format = "json"
)

// ParseFormat checks a --format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatTable, FormatMarkdown, FormatCSV, FormatJSON:
		return f, nil
	}
	return "", fmt.Errorf("--format: expected table, markdown, csv or json, found %q", s)
}

// Write renders the report's tables in format f.
func (r *Report) Write(w io.Writer, f Format) error {
	bw := bufio.NewWriter(w)
	var err error
	switch f {
	case FormatTable:
		err = r.writeText(bw, false)
	case FormatMarkdown:
		err = r.writeText(bw, true)
	case FormatCSV:
		err = r.writeCSV(bw)
	case FormatJSON:
		err = r.writeJSON(bw)
	default:
		err = fmt.Errorf("unknown format %q", f)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func (r *Report) writeText(w io.Writer, md bool) error {
	if md {
		fmt.Fprintf(w, "# blis-report\n\n")
	}
	for _, in := range r.Inputs {
		if md {
			fmt.Fprintf(w, "- input `%s`: %d rows\n", in.Path, in.Rows)
		} else {
			fmt.Fprintf(w, "input %s: %d rows\n", in.Path, in.Rows)
		}
	}
	for _, n := range r.Notes {
		if md {
			fmt.Fprintf(w, "- note: %s\n", n)
		} else {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	for _, t := range r.Tables {
		fmt.Fprintln(w)
		if md {
			fmt.Fprintf(w, "## %s\n\n", t.Title)
			if t.Note != "" {
				fmt.Fprintf(w, "%s\n\n", t.Note)
			}
		} else {
			fmt.Fprintf(w, "%s\n", t.Title)
			if t.Note != "" {
				fmt.Fprintf(w, "(%s)\n", t.Note)
			}
		}
		if err := renderTable(w, t, md); err != nil {
			return err
		}
	}
	return nil
}

// A cell is one line; in Markdown a pipe would also end it.
var (
	textCell = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")
	mdCell   = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "|", `\|`)
)

func renderTable(w io.Writer, t *Table, md bool) error {
	align := make(tw.Alignment, len(t.Columns))
	for j := range align {
		align[j] = tw.AlignLeft
		if t.numeric(j) {
			align[j] = tw.AlignRight
		}
	}
	opts := []tablewriter.Option{
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAutoFormat(tw.Off),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithAlignment(align),
	}
	if md {
		opts = append(opts, tablewriter.WithRenderer(renderer.NewMarkdown()))
	}
	tbl := tablewriter.NewTable(w, opts...)
	hdr := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		hdr[i] = c
	}
	tbl.Header(hdr...)
	esc := textCell
	if md {
		esc = mdCell
	}
	for _, row := range t.Rows {
		s := make([]string, len(row))
		for j, c := range row {
			s[j] = esc.Replace(c.String())
		}
		if err := tbl.Append(s); err != nil {
			return err
		}
	}
	return tbl.Render()
}

// writeCSV writes one long-format CSV: table,row,column,value, so every table
// fits one schema that spreadsheets and dataframes read directly.
func (r *Report) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"table", "row", "column", "value"}); err != nil {
		return err
	}
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			key := rowKey(t, row)
			for j, c := range row {
				if j < t.keyCols() {
					continue
				}
				v := c.String()
				if v == "-" && c.IsNum {
					v = ""
				}
				if err := cw.Write([]string{t.Name, key, t.Columns[j], v}); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// keyCols is the number of leading text columns that identify a row.
func (t *Table) keyCols() int {
	n := 0
	for j := range t.Columns {
		if t.numeric(j) {
			break
		}
		n++
	}
	return max(n, 1)
}

func rowKey(t *Table, row []Cell) string {
	parts := make([]string, 0, 2)
	for j := 0; j < t.keyCols() && j < len(row); j++ {
		parts = append(parts, row[j].String())
	}
	return strings.Join(parts, "/")
}

// writeJSON writes keys in a fixed order and numbers with fixed precision, by
// hand, so that the bytes never depend on map order or float printing.
func (r *Report) writeJSON(w io.Writer) error {
	fmt.Fprintf(w, "{\n  \"tool\": \"blis-report\",\n  \"inputs\": [")
	for i, in := range r.Inputs {
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		fmt.Fprintf(w, "\n    {\"path\": %s, \"rows\": %d}", strconv.Quote(in.Path), in.Rows)
	}
	fmt.Fprint(w, "\n  ],\n  \"notes\": [")
	for i, n := range r.Notes {
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		fmt.Fprintf(w, "\n    %s", strconv.Quote(n))
	}
	fmt.Fprint(w, "\n  ],\n  \"tables\": [")
	for i, t := range r.Tables {
		if i > 0 {
			fmt.Fprint(w, ",")
		}
		fmt.Fprintf(w, "\n    {\n      \"name\": %s,\n      \"title\": %s,\n      \"note\": %s,\n      \"columns\": [",
			strconv.Quote(t.Name), strconv.Quote(t.Title), strconv.Quote(t.Note))
		for j, c := range t.Columns {
			if j > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprint(w, strconv.Quote(c))
		}
		fmt.Fprint(w, "],\n      \"rows\": [")
		for k, row := range t.Rows {
			if k > 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprint(w, "\n        [")
			for j, c := range row {
				if j > 0 {
					fmt.Fprint(w, ", ")
				}
				fmt.Fprint(w, c.json())
			}
			fmt.Fprint(w, "]")
		}
		fmt.Fprint(w, "\n      ]\n    }")
	}
	_, err := fmt.Fprint(w, "\n  ]\n}\n")
	return err
}
