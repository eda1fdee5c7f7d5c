// Command datahash prints a digest of each table's data — column names and
// every value, row by row — leaving out its metadata (provenance, wall
// time). Two runs whose outputs should be byte-identical but for their
// metadata (leaping on and off, two builds of blis-sim) are compared by
// their digests:
//
//	go run ./bench/datahash a.arrow b.arrow
package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/blis-sim/blis/lib/trace"
	_ "github.com/blis-sim/blis/lib/trace/parquetio"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: datahash FILE...")
		os.Exit(2)
	}
	status := 0
	for _, p := range os.Args[1:] {
		sum, rows, err := digest(p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "datahash: %v\n", err)
			status = 1
			continue
		}
		fmt.Printf("%x  %d rows  %s\n", sum, rows, p)
	}
	os.Exit(status)
}

// digest hashes the column names, then each row's values in column order
// (a value's text form, each ended by a 0 byte): batch boundaries do not
// change it.
func digest(path string) ([]byte, int64, error) {
	src, err := trace.Open(path, os.Stdin)
	if err != nil {
		return nil, 0, err
	}
	defer src.Close()
	h := sha256.New()
	for _, f := range src.Schema().Fields() {
		fmt.Fprintf(h, "%s:%s\x00", f.Name, f.Type)
	}
	var rows int64
	for {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, rows, err
		}
		cols := rec.Columns()
		for i := 0; i < int(rec.NumRows()); i++ {
			for _, c := range cols {
				io.WriteString(h, c.ValueStr(i))
				h.Write([]byte{0})
			}
			rows++
		}
	}
	return h.Sum(nil), rows, nil
}
