// Command closedloop compares two results tables request by request: |TTFT
// difference| and |E2E difference| percentiles and the mean signed
// difference (first − second). By request id; with -serve, the second is
// blis-serve's (ids cmpl-N): requests are matched in order of arrival
// with equal token counts (bench/serve.sh).
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/blis-sim/blis/lib/trace"
)

func read(p string) []trace.Result {
	src, err := trace.Open(p, nil)
	if err != nil {
		fail(err)
	}
	rr, err := trace.NewResultReader(src)
	if err != nil {
		fail(err)
	}
	var out []trace.Result
	for {
		buf, err := rr.Next(nil)
		out = append(out, buf...)
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ArrivalUS < out[j].ArrivalUS })
	return out
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: closedloop A.arrow B.arrow [-serve]")
		os.Exit(2)
	}
	a, b := read(os.Args[1]), read(os.Args[2])
	m := map[string]trace.Result{}
	if len(os.Args) > 3 && os.Args[3] == "-serve" {
		// b is blis-serve's: match by order of arrival and token counts.
		used := make([]bool, len(b))
		for _, x := range a {
			for j := range b {
				if !used[j] && b[j].InputTokens == x.InputTokens && b[j].OutputTokens == x.OutputTokens {
					used[j] = true
					m[x.ID] = b[j]
					break
				}
			}
		}
	} else {
		for _, r := range b {
			m[r.ID] = r
		}
	}
	var dt, de []int64
	var st, se int64
	for _, x := range a {
		y, ok := m[x.ID]
		if !ok || x.Status != "completed" || y.Status != "completed" {
			continue
		}
		d1, d2 := x.TTFTUS-y.TTFTUS, x.E2EUS-y.E2EUS
		st += d1
		se += d2
		dt = append(dt, abs(d1))
		de = append(de, abs(d2))
	}
	if len(dt) == 0 {
		fail(fmt.Errorf("no completed request in common"))
	}
	for _, v := range []struct {
		n string
		d []int64
		s int64
	}{{"ttft", dt, st}, {"e2e", de, se}} {
		sort.Slice(v.d, func(i, j int) bool { return v.d[i] < v.d[j] })
		n := len(v.d)
		fmt.Printf("%s: %d requests, |difference| p50 %.2f ms p90 %.2f p99 %.2f max %.2f; mean signed %+.2f ms\n", v.n, n, ms(v.d[n/2]), ms(v.d[n*9/10]), ms(v.d[n*99/100]), ms(v.d[n-1]), ms(v.s)/float64(n))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "closedloop:", err)
	os.Exit(1)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func ms(x int64) float64 { return float64(x) / 1000 }
