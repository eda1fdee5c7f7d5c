package load

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/blis-sim/blis/lib/load/fakellm"
	"github.com/blis-sim/blis/lib/trace"
)

// Connections are reused: reading the stream to its end after [DONE] lets
// the transport keep it (a new connection would add a handshake to TTFT).
func TestConnectionsReused(t *testing.T) {
	srv := fakellm.NewUnstarted(fakellm.Config{})
	var n atomic.Int32
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	var reqs []trace.Request
	for i := 0; i < 50; i++ {
		reqs = append(reqs, llm(fmt.Sprintf("r%02d", i), 0, 8, 3))
	}
	session(t, srv, Completions, writeTable(t, reqs, true, 0), Options{Timing: TimingOffline, Concurrency: 1})
	if n.Load() != 1 {
		t.Errorf("51 requests one after another opened %d connections, want 1", n.Load())
	}
}
