package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/blis-sim/blis/lib/trace"
)

// output is -o or --steps. trace.Create writes a file through a temporary
// name renamed into place on Close, so Close after a failed run would
// replace an existing file with a partial one, and a device or pipe (-o
// /dev/null) would be replaced by a regular file. Here a regular path is
// written under a second name that is renamed only after a successful
// run, and a special file is written in place as a stream.
type output struct {
	trace.Sink
	dest, tmp string
	special   *os.File
}

func createOutput(path string, stdout io.Writer, schema *arrow.Schema) (*output, error) {
	o := &output{dest: path}
	if path == "" || path == "-" {
		s, err := trace.Create(path, stdout, schema)
		o.Sink = s
		return o, err
	}
	// Through a symbolic link, replace its target, not the link.
	dest := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		dest = r
	}
	if fi, err := os.Stat(dest); err == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return nil, fmt.Errorf("%s: is a directory", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		s, err := trace.Create("-", f, schema)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		o.Sink, o.special = s, f
		return o, nil
	}
	// Keep the extension: it selects the format.
	o.dest = dest
	o.tmp = filepath.Join(filepath.Dir(dest), fmt.Sprintf(".%s.%d.partial%s", filepath.Base(dest), os.Getpid(), filepath.Ext(path)))
	s, err := trace.Create(o.tmp, nil, schema)
	if err != nil {
		// Name the path the user gave, not the temporary ones.
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: %w", path, pe.Err)
		}
		return nil, errors.New(strings.ReplaceAll(err.Error(), o.tmp, path))
	}
	o.Sink = s
	return o, nil
}

// Close completes the stream (the writers call it); commit then decides.
func (o *output) Close() error {
	err := o.Sink.Close()
	if o.special != nil {
		if cerr := o.special.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// commit renames a closed output into place after a successful run (ok) or
// removes it.
func (o *output) commit(ok bool) error {
	if o.tmp == "" {
		return nil
	}
	if !ok {
		os.Remove(o.tmp)
		return nil
	}
	if err := os.Rename(o.tmp, o.dest); err != nil {
		os.Remove(o.tmp)
		return err
	}
	return nil
}
