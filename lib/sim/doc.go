// Package sim is the run driver: one simulation as a value (the cluster, its
// policies, the requests and the tables it writes), set up, run and put in
// place (or aborted) the same way by blis-sim, blis-eval, blis-sweep and
// blis-serve. The engine (lib/engine) knows nothing of files or Arrow; this
// package is where its rows meet the tables of lib/trace.
package sim
