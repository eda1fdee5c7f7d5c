package main

import (
	"fmt"
	"os"
	"reflect"

	"github.com/blis-sim/blis/lib/trace"
)

func read(p string) ([]trace.Result, *trace.Source) {
	s, err := trace.Open(p, nil)
	if err != nil {
		panic(err)
	}
	rs, err := trace.ReadAllResults(s)
	if err != nil {
		panic(err)
	}
	return rs, s
}

func main() {
	a, sa := read(os.Args[1])
	b, sb := read(os.Args[2])
	if len(a) != len(b) {
		fmt.Println("rows differ", len(a), len(b))
		os.Exit(1)
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			fmt.Printf("row %d differs:\n%+v\n%+v\n", i, a[i], b[i])
			os.Exit(1)
		}
	}
	ma, mb := sa.Schema().Metadata(), sb.Schema().Metadata()
	for _, k := range ma.Keys() {
		va, _ := ma.GetValue(k)
		vb, _ := mb.GetValue(k)
		if va != vb {
			fmt.Printf("meta %s:\n  %.300s\n  %.300s\n", k, va, vb)
		}
	}
	fmt.Println(len(a), "rows identical; fields", len(sa.Schema().Fields()), len(sb.Schema().Fields()))
}
