package sweep

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/blis-sim/blis/lib/bug"
)

// Options configure the execution of a plan.
type Options struct {
	Out     string // output directory
	Workers int    // parallel runs (0 = one per core)
	// ShardIndex/ShardCount select the runs of one shard: run k of the
	// plan belongs to shard k mod ShardCount. ShardCount 0 = all runs.
	ShardIndex, ShardCount int
	Force                  bool // run again even when a record exists
	KeepResults            bool // also keep each run's results table
	// Progress, when set, is called after each run with the counts so far.
	Progress func(Progress)
}

// Progress counts a sweep's runs.
type Progress struct {
	Total, Skipped, Done, Failed int // Skipped: done before; Failed: recorded with an error
	Elapsed                      time.Duration
}

// ETA estimates the time left from the pace so far.
func (p Progress) ETA() time.Duration {
	n := p.Done + p.Failed
	left := p.Total - p.Skipped - n
	if n == 0 || left <= 0 {
		return 0
	}
	return time.Duration(float64(p.Elapsed) / float64(n) * float64(left))
}

// Stats is what an execution did.
type Stats struct {
	Progress
	Errors []error // runs that could not be run (not recorded)
}

// InShard reports whether run k belongs to the shard.
func (o *Options) InShard(k int) bool {
	return o.ShardCount <= 0 || k%o.ShardCount == o.ShardIndex
}

// Execute runs every run of the plan (of the shard) that has no record yet.
func Execute(p *Plan, o Options) (Stats, error) {
	if o.Out == "" {
		return Stats{}, errors.New("no output directory")
	}
	if o.ShardCount > 0 && (o.ShardIndex < 0 || o.ShardIndex >= o.ShardCount) {
		return Stats{}, fmt.Errorf("shard index %d: expected 0..%d", o.ShardIndex, o.ShardCount-1)
	}
	keep := ""
	if o.KeepResults {
		keep = o.Out
	}
	x, err := newRunner(p.Spec, keep)
	if err != nil {
		return Stats{}, err
	}
	var todo []*Run
	seen := map[string]bool{}
	var st Stats
	for k, r := range p.Runs {
		if !o.InShard(k) || seen[r.ID] {
			continue // a duplicate run (same resolved inputs) is run once
		}
		seen[r.ID] = true
		st.Total++
		if !o.Force && hasRecord(o.Out, r.ID) {
			st.Skipped++
			continue
		}
		todo = append(todo, r)
	}
	// Runs on the same workload one after another: the converted trace is
	// then read once and shared.
	first := map[string]int{}
	for i, r := range todo {
		if _, ok := first[r.wkey]; !ok {
			first[r.wkey] = i
		}
	}
	sort.SliceStable(todo, func(i, j int) bool { return first[todo[i].wkey] < first[todo[j].wkey] })

	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, max(1, len(todo)))
	start := time.Now()
	var mu sync.Mutex
	jobs := make(chan *Run)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer bug.Catch()
			for r := range jobs {
				rec, err := x.run(r)
				if err == nil {
					err = writeRecord(o.Out, rec)
				}
				mu.Lock()
				switch {
				case err != nil:
					st.Errors = append(st.Errors, fmt.Errorf("run %s (point %d, replication %d): %w", r.ID[:12], r.Point.Index, r.Replication, err))
				case rec.Error != "":
					st.Failed++
				default:
					st.Done++
				}
				st.Elapsed = time.Since(start)
				pr := st.Progress
				mu.Unlock()
				if o.Progress != nil {
					o.Progress(pr)
				}
			}
		}()
	}
	for _, r := range todo {
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	st.Elapsed = time.Since(start)
	return st, nil
}

// Missing lists the runs of the plan without a record, and the shards (of
// shardCount) that hold them.
func Missing(p *Plan, out string, shardCount int) (runs []*Run, shards []int) {
	inShard := map[int]bool{}
	for k, r := range p.Runs {
		if hasRecord(out, r.ID) {
			continue
		}
		runs = append(runs, r)
		if shardCount > 0 && !inShard[k%shardCount] {
			inShard[k%shardCount] = true
			shards = append(shards, k%shardCount)
		}
	}
	sort.Ints(shards)
	return runs, shards
}
