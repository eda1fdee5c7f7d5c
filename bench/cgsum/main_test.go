package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cut of a real cachegrind.out (valgrind 3.19, --cache-sim=yes).
const sample = `desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: LL cache:         33554432 B, 64 B, 16-way associative
cmd: blis-sim --replicas 8 r96.arrows
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw 
fl=/work/main/lib/engine/cluster/lifecycle.go
fn=github.com/blis-sim/blis/lib/engine/cluster.(*Cluster).writeResult
110 10 0 0 4 2 1
111 5 0 0 2 0 0 3 1 1
fn=runtime.memmove
40 100 0 0 50 7 3 20 9 2
fl=/work/main/lib/engine/cluster/input.go
fn=github.com/blis-sim/blis/lib/engine/cluster.(*Cluster).writeResult
12 1
summary: 116 0 0 ...
`

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fns, err := read(write("ok", sample))
	if err != nil {
		t.Fatal(err)
	}
	// writeResult: its lines in both files summed; trailing zeros omitted.
	if got, want := fns["github.com/blis-sim/blis/lib/engine/cluster.(*Cluster).writeResult"], (counts{ir: 16, d1: 3, ll: 2}); got != want {
		t.Errorf("writeResult: got %+v, want %+v", got, want)
	}
	// Instructions only (--cache-sim=no).
	if fns, err := read(write("ir", "events: Ir\nfn=f\n1 7\n2 5\n")); err != nil || fns["f"] != (counts{ir: 12}) {
		t.Errorf("instructions only: got %v, %v", fns, err)
	}
	if got, want := fns["runtime.memmove"], (counts{ir: 100, d1: 16, ll: 5}); got != want {
		t.Errorf("memmove: got %+v, want %+v", got, want)
	}

	for _, c := range []struct{ name, text, want string }{
		{"noevents", "fn=f\n", "no events: line"},
		{"noir", "events: D1mr\nfn=f\n1 2\n", "lacks Ir"},
		{"early", "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\n1 2\n", "early:2: a cost line before"},
		{"text", "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\nfn=f\n1 x\n", `count "x"`},
		{"dup", "events: Ir Ir D1mr DLmr D1mw DLmw\n", "event Ir named twice"},
		{"twice", "events: Ir D1mr DLmr D1mw DLmw\nevents: Ir\n", "twice:2: a second events: line"},
		{"long", "events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw\nfn=f\n1 1 1 1 1 1 1 1 1 1 1\n", "10 counts, expected at most 9"},
	} {
		_, err := read(write(c.name, c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestPart(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/blis-sim/blis/lib/engine/replica.(*span).price":         "blis",
		"github.com/apache/arrow-go/v18/arrow/array.(*Int32Builder).Append": "arrow",
		"runtime.scanObject":                            "go runtime",
		"internal/runtime/maps.(*Map).getWithKey":       "go runtime",
		"gcWriteBarrier":                                "go runtime",
		"crypto/internal/fips140/sha256.blockAVX2.abi0": "other",
	} {
		got := "other"
		if i := part(fn); i < len(parts) {
			got = parts[i].name
		}
		if got != want {
			t.Errorf("%s: got %s, want %s", fn, got, want)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(sample)
	f.Add("events: Ir\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(dir, "in")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = read(p) // an error or counts, never a panic
	})
}
