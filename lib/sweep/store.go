package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/blis-sim/blis/lib/cleanup"
)

// The output directory of a sweep:
//
//	runs/ab/abcdef….json    one record per run, named by its id
//	results/ab/abcdef….arrow the run's results table (with --keep-results)
//	summary.parquet         one row per run × report group
//	points.parquet          one row per point × group: mean and 95% CI over seeds
//	slurm/                  job scripts and task logs (--slurm)
//
// Records are written under a temporary name and renamed, so a run killed
// half-way leaves no record and is run again; several processes (Slurm
// tasks) can share the directory.

func recordPath(out, id string) string {
	return filepath.Join(out, "runs", id[:2], id+".json")
}

func resultsPath(out, id string) string {
	return filepath.Join(out, "results", id[:2], id+".arrow")
}

// writeFileAtomic writes b to path through a temporary file in the same directory.
func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer cleanup.Add(f.Name())()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeRecord(out string, r *Record) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return writeFileAtomic(recordPath(out, r.ID), append(b, '\n'))
}

// readRecord reads a run's record; (nil, nil) when there is none.
func readRecord(out, id string) (*Record, error) {
	p := recordPath(out, id)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a run record (%v): delete it to run it again", p, err)
	}
	if r.ID != id || r.Format != recordFormat {
		return nil, fmt.Errorf("%s: record of run %q (format %d), expected %s (format %d): delete it to run it again", p, r.ID, r.Format, id, recordFormat)
	}
	return &r, nil
}

// hasRecord reports whether run id is done.
func hasRecord(out, id string) bool {
	_, err := os.Stat(recordPath(out, id))
	return err == nil
}

// HasRecord reports whether run id has a result in the output directory out.
func HasRecord(out, id string) bool { return hasRecord(out, id) }
