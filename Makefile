# The two commands a new user needs are `make demo` and `make test`.
BIN := bin
BINARIES := blis-convert blis-synth blis-sim blis-report blis-calibrate blis-sweep blis-load blis-serve blis-eval
GO ?= go

.PHONY: all build demo test vet fmt-check fuzz-smoke bench coefficients fidelity pgo clean

all: build

# --version and provenance name the commit the binaries were built from, as
# go build and go run name it from Go's own VCS stamping (lib/trace.Version):
# the first 12 digits of the revision, -dirty when `git status --porcelain`
# lists anything (untracked files too, as Go counts them; the README's own
# outputs are in .gitignore).
COMMIT := $(shell r=$$(git rev-parse HEAD 2>/dev/null) && echo "$$(echo $$r | cut -c1-12)$$([ -n "$$(git status --porcelain 2>/dev/null)" ] && echo -dirty)")

# The binaries are built with profile-guided optimisation from
# cmd/default.pgo (make pgo regenerates it; docs/engine.md, "Profile-guided
# optimisation"): 3-10% less CPU on runs that are not memory-bound, results
# unchanged. Go picks up default.pgo only in a main package's own directory,
# so it is named here; `make build PGO=off` builds without it. Tests build
# without it, so that they compile each dependency once.
PGO ?= cmd/default.pgo

build:
	@mkdir -p $(BIN)
	$(GO) build -pgo=$(PGO) -ldflags "-X github.com/blis-sim/blis/lib/trace.commit=$(COMMIT)" -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

# A real pipeline on data shipped in the repo: the Azure LLM inference trace
# (coding, 2023; 8,819 requests) replayed on 4 simulated H100s serving Llama-3.1-8B.
demo: build
	$(BIN)/blis-convert testdata/azure2023_code.csv \
	  | $(BIN)/blis-sim --replicas 4 --model llama-3.1-8b --gpu h100 \
	  | $(BIN)/blis-report

# Tests of blis-load's issue times (and blis-serve's closed loop) run on their own, after the rest: a
# parallel test run would measure the other packages' CPU, not ours (-p 1:
# not even the two packages of blis-load side by side). So does the README's
# own test, which serves and measures in real time (blis-load against a test
# server and against blis-serve). The browser tests and the tests that need
# ../shared/data run on their own too, so that make test says when they
# were skipped.
test: fmt-check vet
	BLIS_SKIP_TIMING=1 $(GO) test -count=1 -skip 'InBrowser|SharedData|READMECommands' ./...
	$(GO) test -count=1 -p 1 -run 'Precision|MockLLM|Schedulers|DurationAndLimit|ClosedLoop|READMECommands' ./lib/load/ ./cmd/blis-load/ ./lib/serve/ ./internal/e2e/
	scripts/browser-tests.sh
	scripts/shared-data-tests.sh
	scripts/fuzz-smoke.sh

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

fuzz-smoke:
	scripts/fuzz-smoke.sh

# Every benchmark script with short defaults (bench/run.sh; FULL=1 for their full sizes).
bench:
	bench/run.sh

# Regenerates every file in coefficients/ from ../shared/data/measurements.
coefficients: build
	scripts/regen-coefficients.sh

# Regenerates cmd/default.pgo, the profile make build optimises with, from
# representative runs (scripts/regen-pgo.sh says which).
pgo:
	scripts/regen-pgo.sh

# Replays every real run in ../shared/data/measurements and regenerates the
# fidelity tables of docs/latency.md and the known-error table blis-sim
# quotes (lib/latency/knownerror.json); deterministic.
fidelity:
	$(GO) run ./bench/fidelity -q -update docs/latency.md -json lib/latency/knownerror.json

clean:
	rm -rf $(BIN)
