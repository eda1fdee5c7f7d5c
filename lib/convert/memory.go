package convert

import (
	"io"
	"os"

	"github.com/blis-sim/blis/lib/badinput"
	"github.com/blis-sim/blis/lib/trace"
)

// ReadRequests reads a whole trace into memory, for tools that need every
// request at once (blis-calibrate replays a recorded run; bench/fidelity
// judges the simulator on it): any format Convert reads (format "" detects
// it), or an Arrow/Parquet requests table. Rows come back in arrival order
// with times relative to the first request, exactly as Convert writes them.
func ReadRequests(path, format string) ([]trace.Request, error) {
	opts := Options{Inputs: []string{path}, Format: format, Tool: "blis"}
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	var stdin io.Reader = os.Stdin
	if format == "arrow" || format == "" {
		in, err := openInput(path, stdin)
		if err != nil {
			return nil, err
		}
		if format == "arrow" || isArrowBytes(in.head()) {
			defer in.close()
			src, cleanup, err := openTable(in)
			if err != nil {
				return nil, err
			}
			defer cleanup()
			defer src.Close()
			reqs, err := trace.ReadAllRequests(src)
			if err != nil {
				return nil, badinput.Wrap(err)
			}
			return reqs, nil
		}
		in.close()
		if in.path == "-" {
			stdin = in.br // detection peeked into stdin: hand the buffer on
		}
	}
	var out []trace.Request
	_, err := convertWith(opts, stdin, func(trace.Meta) (rowSink, error) { return &sliceSink{&out}, nil })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sliceSink keeps converted rows. Parsers hand out fresh slices per row
// (the reorder window stores rows by value), so a shallow copy is safe.
type sliceSink struct{ out *[]trace.Request }

func (s *sliceSink) Write(r *trace.Request) error { *s.out = append(*s.out, *r); return nil }
func (s *sliceSink) Close() error                 { return nil }
