# Habits, automated. CI runs .ci/run (gofmt, vet, test, race, bench module build).
.PHONY: test race vet lint bench fuzz soak chaos ci kgo-suite

test:
	go test ./...

race:
	go test -race ./...

vet:
	go vet ./...

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Storage, timer and client benchmarks of the main module (see README for the figures).
bench:
	go test -run '^$$' -bench . -benchmem ./log/ ./segment/... ./index/ ./timingwheel/

# Side-by-side against tidwall/wal, NATS JetStream, kfake, time.AfterFunc (nested module).
bench-peers:
	cd bench && go run . -quick

# Every fuzz target for FUZZTIME each (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for pkg in ./segment/batch ./segment ./index ./group ./vfs ./kafka; do \
	  for f in $$(go test -list 'Fuzz.*' $$pkg | grep ^Fuzz); do \
	    echo "== $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Long randomized runs: STRATA_SOAK=1 enlarges the randomized tests.
soak:
	STRATA_SOAK=1 go test -count=1 -timeout 60m ./...

# Three strata serve processes under SIGKILL/SIGSTOP while a kgo producer and group consumer
# run (interop/chaos_test.go); CHAOS=10m by default. CI runs the short version (5 kills).
CHAOS ?= 10m
chaos:
	cd interop && STRATA_CHAOS=$(CHAOS) go test -count=1 -run '^TestChaosProcesses$$' -timeout 0 -v .

# franz-go's own kgo integration tests against `strata serve` (not in CI: long). TESTS is
# the -run regex (default all); scripts/kgo-suite.sh's header lists the commands per test.
TESTS ?= .
kgo-suite:
	TESTS='$(TESTS)' bash scripts/kgo-suite.sh

ci:
	bash .ci/run
