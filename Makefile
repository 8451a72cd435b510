# Highload Lab. `make lab` and `make test` set up what they need themselves.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/highload-lab/hlab/internal/cli.Version=$(VERSION)
# Flags for `make lab`, e.g. make lab LAB_FLAGS="scale --full".
LAB_FLAGS ?= --quick --json lab-report/results.json

.PHONY: all build deps lab test vet bench clean proto

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/hlab ./cmd/hlab

# System packages (nginx, wrk) and Go modules; quick when all are there.
deps:
	scripts/install-deps.sh

lab: deps build
	./bin/hlab lab $(LAB_FLAGS)

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# HLAB_REQUIRE_DEPS: a test whose real dependency cannot run fails rather
# than skips (internal/deps/depstest), so a green run means it ran.
# Then the README's quickstarts, run from its own blocks.
test: deps vet build
	HLAB_REQUIRE_DEPS=1 $(GO) test -race -timeout 30m ./...
	scripts/quickstarts.sh

# Go benchmarks one package at a time (-p 1: packages measured side by side
# on 2 cores would slow each other), among them internal/userrepo: report
# B's Get over Postgres, Redis, MongoDB (a stand-in) and the replica, with
# the replica/Redis ratio.
bench: deps build
	$(GO) test -p 1 -run '^$$' -bench . -benchmem ./...
	bench/loadgen-vs-wrk.sh
	bench/databus.sh

# Only the databus gateway's speed targets (echo, publish, idle streams).
.PHONY: bench-databus
bench-databus: build
	bench/databus.sh

# Report C's crud experiment at full length, with its fixed-count runs:
# 1,000,000 requests all on, 12,000 and 100,000 all off (about 30 minutes).
.PHONY: bench-crud
bench-crud: deps build
	./bin/hlab lab crud --full --json lab-report/crud-full.json --report lab-report

clean:
	rm -rf bin lab-report

# Regenerate the gRPC code from api/**/*.proto with pinned protoc plugins.
proto:
	scripts/gen-proto.sh

# The README's quickstarts alone (make test runs them too).
.PHONY: quickstarts
quickstarts: deps build
	scripts/quickstarts.sh
