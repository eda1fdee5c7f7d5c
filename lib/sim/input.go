package sim

import (
	"fmt"
	"io"
	"runtime"
	"strconv"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/trace"
)

// Input is a requests table opened for a run: a sorted table streams (memory
// follows the requests in flight), any other is read into memory to be
// ordered.
type Input struct {
	Source engine.Source
	Meta   trace.Meta
	// Path names the input in messages; PrefixBlockSize is its
	// blis.prefix_block_size (0: each deployment's block size).
	Path            string
	PrefixBlockSize int
	// MaxInFlight is the client's cap on requests in flight the table
	// records (blis.max_in_flight; 0: none).
	MaxInFlight int
	// PrefixUnique is its blis.prefix_unique promise.
	PrefixUnique bool
	// Total is its rows when known without reading it (a file's message
	// headers or footer, or a table read into memory), else 0.
	Total int64
	// InMemory: not marked blis.sorted=arrival, so its rows were read into
	// memory to be ordered (InMemory rows).
	InMemory bool
	// described is the input for the outputs' provenance (nil: a pipe),
	// known once hashed is closed: a file's SHA-256 is computed beside
	// the run (stop ends it early).
	described    *trace.Input
	hashed, stop chan struct{}
	close        func()
}

// OpenInput opens the requests table at path ("-": stdin). Its errors are
// the user's input (exit status 2).
func OpenInput(path string, stdin io.Reader) (*Input, error) {
	src, err := trace.Open(path, stdin)
	if err != nil {
		return nil, badinput.Wrap(err)
	}
	in := &Input{Meta: src.Meta(), Path: src.Path, close: func() { src.Close() },
		hashed: make(chan struct{}), stop: make(chan struct{})}
	hash := func() {
		defer close(in.hashed)
		if d, err := trace.DescribeInputUntil(path, in.stop); err == nil {
			in.described = &d
		}
	}
	if runtime.GOMAXPROCS(0) > 1 {
		go hash()
	} else {
		hash() // no processor to spare
	}
	fail := func(err error) (*Input, error) {
		in.Close()
		return nil, badinput.Wrap(err)
	}
	rr, err := trace.NewRequestReader(src)
	if err != nil {
		return fail(err)
	}
	if v := in.Meta.Get(trace.MetaPrefixBlockSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fail(fmt.Errorf("%s: schema metadata %s: expected a positive integer, found %q", src.Path, trace.MetaPrefixBlockSize, v))
		}
		in.PrefixBlockSize = n
	}
	if in.MaxInFlight, err = in.Meta.MaxInFlight(); err != nil {
		return fail(fmt.Errorf("%s: %w", src.Path, err))
	}
	if in.PrefixUnique, err = in.Meta.PrefixUnique(); err != nil {
		return fail(fmt.Errorf("%s: %w", src.Path, err))
	}
	in.Source = rr
	in.Total, _ = trace.CountRows(path)
	if in.Meta.Get(trace.MetaSorted) != "arrival" {
		tab, err := trace.ReadRequestTable(src)
		if err != nil {
			return fail(err)
		}
		in.close = func() { tab.Release(); src.Close() }
		in.Source, in.InMemory, in.Total = engine.TableSource(tab), true, int64(tab.Len())
	}
	if !in.InMemory && runtime.GOMAXPROCS(0) > 1 {
		// Decoded beside the simulation (a processor to spare).
		ra := trace.NewReadAhead(rr)
		in.Source = ra
		in.close = func() { ra.Close(); src.Close() }
	}
	return in, nil
}

// Inputs names the input for a provenance's stage: a file's path and hash
// (waiting for the hash), nothing for a pipe. Run.LateInputs takes it.
func (in *Input) Inputs() []trace.Input {
	<-in.hashed
	if in.described == nil {
		return nil
	}
	return []trace.Input{*in.described}
}

// Close releases the input.
func (in *Input) Close() {
	if in.stop != nil {
		close(in.stop)
		<-in.hashed
		in.stop = nil
	}
	if in.close != nil {
		in.close()
		in.close = nil
	}
}
