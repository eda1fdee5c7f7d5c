// Command fakellm serves lib/load/fakellm, the test server of blis-load,
// in a process of its own, for benchmarks (bench/load.sh). It prints its
// API base on stdout and serves until killed.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/blis-sim/blis/lib/load/fakellm"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	ttft := flag.Duration("ttft", 20*time.Millisecond, "time to first token")
	itl := flag.Duration("itl", 5*time.Millisecond, "inter-token latency")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
	srv := fakellm.NewUnstarted(fakellm.Config{TTFT: *ttft, ITL: *itl})
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	fmt.Println(srv.URL0())
	select {}
}
