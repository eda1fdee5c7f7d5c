// Command cgsum sums valgrind cachegrind output files (cachegrind.out.*)
// by where the code lives: this project, Apache Arrow, the Go runtime (the
// collector and scheduler), the rest. A virtual machine without hardware
// performance counters cannot count cache misses; cachegrind simulates
// them, and the simulation's counts are exact and repeatable where timings
// are noisy (bench/misses.sh):
//
//	go run ./bench/cgsum [-top N] cachegrind.out...
//
// Per file it prints instructions, first-level data misses and last-level
// data misses, in millions (misses are 0 in a run with --cache-sim=no);
// -top N lists the N functions with the most last-level data misses.
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// counts are one function's (or part's) figures.
type counts struct{ ir, d1, ll int64 }

func (c *counts) add(o counts) { c.ir += o.ir; c.d1 += o.d1; c.ll += o.ll }

// parts are the columns printed, in order, and the prefixes that put a
// function in each (the first match wins; the rest is "other").
var parts = []struct {
	name     string
	prefixes []string
}{
	{"blis", []string{"github.com/blis-sim/"}},
	{"arrow", []string{"github.com/apache/arrow-go/"}},
	{"go runtime", []string{"runtime.", "internal/runtime/", "gcWriteBarrier", "runtime/"}},
}

func part(fn string) int {
	for i, p := range parts {
		for _, pre := range p.prefixes {
			if strings.HasPrefix(fn, pre) {
				return i
			}
		}
	}
	return len(parts)
}

func main() {
	top := flag.Int("top", 0, "list the `N` functions with the most last-level data misses")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: cgsum [-top N] cachegrind.out...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	fmt.Printf("%-28s %9s %9s %9s %9s %9s %9s\n", "file (millions)", "instr", "blis", "runtime", "D1 miss", "LL miss", "LL blis")
	status := 0
	for _, p := range flag.Args() {
		fns, err := read(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "cgsum: %v\n", err)
			status = 1
			continue
		}
		byPart := make([]counts, len(parts)+1)
		var all counts
		for fn, c := range fns {
			byPart[part(fn)].add(c)
			all.add(c)
		}
		m := func(v int64) string { return strconv.FormatFloat(float64(v)/1e6, 'f', 2, 64) }
		fmt.Printf("%-28s %9s %9s %9s %9s %9s %9s\n", p, m(all.ir), m(byPart[0].ir), m(byPart[2].ir), m(all.d1), m(all.ll), m(byPart[0].ll))
		if *top > 0 {
			names := make([]string, 0, len(fns))
			for fn := range fns {
				names = append(names, fn)
			}
			slices.SortFunc(names, func(a, b string) int {
				return cmp.Or(cmp.Compare(fns[b].ll, fns[a].ll), cmp.Compare(a, b))
			})
			for _, fn := range names[:min(*top, len(names))] {
				c := fns[fn]
				fmt.Printf("    %9d LL %10d D1 %12d instr  %s\n", c.ll, c.d1, c.ir, fn)
			}
		}
	}
	os.Exit(status)
}

// read sums a cachegrind output file's cost lines by function. The format:
// an "events:" line naming the columns, then "fl=" and "fn=" lines, each
// followed by "line count count..." lines (trailing zero counts omitted).
func read(path string) (map[string]counts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	col := map[string]int{}
	fns := map[string]counts{}
	fn := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "events:"):
			if len(col) > 0 {
				return nil, fmt.Errorf("%s:%d: a second events: line", path, n)
			}
			names := strings.Fields(line[len("events:"):])
			for i, e := range names {
				if _, dup := col[e]; dup {
					return nil, fmt.Errorf("%s:%d: event %s named twice", path, n, e)
				}
				col[e] = i
			}
			if _, ok := col["Ir"]; !ok {
				return nil, fmt.Errorf("%s:%d: events line lacks Ir", path, n)
			}
		case strings.HasPrefix(line, "fn="):
			fn = line[3:]
		case line != "" && line[0] >= '0' && line[0] <= '9':
			if fn == "" || len(col) == 0 {
				return nil, fmt.Errorf("%s:%d: a cost line before its events: and fn= lines", path, n)
			}
			fs := strings.Fields(line)
			v := make([]int64, len(col))
			for i, s := range fs[1:] {
				if i >= len(v) {
					return nil, fmt.Errorf("%s:%d: %d counts, expected at most %d", path, n, len(fs)-1, len(v))
				}
				if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
					return nil, fmt.Errorf("%s:%d: count %q: expected an integer", path, n, s)
				}
			}
			get := func(e string) int64 {
				if i, ok := col[e]; ok {
					return v[i]
				}
				return 0 // not simulated (--cache-sim=no)
			}
			c := fns[fn]
			c.add(counts{ir: get("Ir"), d1: get("D1mr") + get("D1mw"), ll: get("DLmr") + get("DLmw")})
			fns[fn] = c
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(col) == 0 {
		return nil, fmt.Errorf("%s: no events: line (not a cachegrind output file)", path)
	}
	return fns, nil
}
