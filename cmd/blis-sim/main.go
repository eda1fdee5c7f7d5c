// Command blis-sim simulates a cluster of LLM serving replicas on a requests
// table and writes the results table.
package main

import (
	"github.com/blis-sim/blis/lib/cliutil"
	"github.com/blis-sim/blis/lib/engine/simcli"
)

func main() { cliutil.Run(simcli.App()) }
