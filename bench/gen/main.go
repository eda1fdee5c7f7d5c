// Command gen writes the benchmark workload as a requests table: Poisson
// arrivals, input and output lengths normal(mean, sd) clamped to [min, max].
// It exists so bench/sim.sh does not depend on blis-synth.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

func main() {
	n := flag.Int("n", 100000, "requests")
	rate := flag.Float64("rate", 96, "arrivals per second (Poisson)")
	mean := flag.Float64("mean", 512, "mean input and output tokens")
	sd := flag.Float64("sd", 256, "standard deviation of input and output tokens")
	lo := flag.Int("min", 2, "minimum tokens")
	hi := flag.Int("max", 7000, "maximum tokens")
	seed := flag.Uint64("seed", 1, "seed")
	out := flag.String("o", "-", "output")
	sorted := flag.Bool("sorted", true, "mark the table blis.sorted=arrival (false: blis-sim reads it into memory)")
	models := flag.String("models", "", "comma-separated models the requests name in turn (default: no model column values)")
	flag.Parse()
	var ms []string
	if *models != "" {
		ms = strings.Split(*models, ",")
	}
	if err := gen(*n, *rate, *mean, *sd, *lo, *hi, *seed, *sorted, ms, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func gen(n int, rate, mean, sd float64, lo, hi int, seed uint64, sorted bool, models []string, out string) error {
	md := trace.NewMeta().With(trace.Stage{Tool: "bench/gen", Version: trace.Version, Seed: &seed})
	if sorted {
		md.Set(trace.MetaSorted, "arrival")
	}
	schema := trace.RequestsSchema(md)
	sink, err := trace.Create(out, os.Stdout, schema)
	if err != nil {
		return err
	}
	w := trace.NewRequestWriter(sink, schema)
	arr := rng.New(seed, "arrivals")
	lens := rng.New(seed, "lengths")
	clamp := func(x float64) int32 {
		v := int(math.Round(x))
		return int32(min(max(v, lo), hi))
	}
	t := 0.0
	for i := 0; i < n; i++ {
		t += arr.ExpFloat64() / rate
		r := trace.NewRequest("r" + strconv.Itoa(i))
		r.ArrivalUS = int64(t * 1e6)
		r.InputTokens = clamp(mean + sd*lens.NormFloat64())
		r.OutputTokens = clamp(mean + sd*lens.NormFloat64())
		r.SourceRow = int64(i + 1)
		if len(models) > 0 {
			r.Model = models[i%len(models)]
		}
		if err := w.Write(&r); err != nil {
			return err
		}
	}
	return w.Close()
}
