# kshard: the user's entry points. `make demo` and `make test` are the two commands the README
# opens with; everything else is a step of theirs.
SHELL := /bin/bash
# ccache (when present) shares its cache between checkouts: paths are taken relative to the
# checkout, so a fresh clone elsewhere reuses what an earlier build compiled.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
.DEFAULT_GOAL := build

.PHONY: deps build build-dev unit-test api-test chart-test test cluster-test e2e-test kube-e2e operator-e2e \
        scenarios chaos cluster-up cluster-down demo bench fuzz fuzz-smoke format lint clean help \
        images images-test sdk-test

help:
	@echo "make demo          build, start the local cluster, install kshard, run the counter example"
	@echo "make test          every test: unit and component (ASan+UBSan), images, cluster, end-to-end"
	@echo "make build         optimised build; executables in build/bin/"
	@echo "make unit-test     unit and component tests only"
	@echo "make fuzz-smoke    every fuzz harness for 10 s (part of make test)"
	@echo "make api-test      Schemathesis against the sidecar's OpenAPI description (part of make test)"
	@echo "make sdk-test      the Go and Python SDKs' tests, and the app contract suite on the three counters"
	@echo "make chaos         the randomized fault suite on the local cluster: SEED= (default random), DURATION= (30m), APP= (cpp, go)"
	@echo "make images        the images (buildah, base images made locally), archives in build/images/"
	@echo "make cluster-up    start the local Kubernetes cluster (.cluster/kubeconfig)"
	@echo "make cluster-down  stop it and remove everything it created"
	@echo "make bench         run the benchmarks (figures go to docs/benchmarks.md)"
	@echo "make fuzz          run every fuzz harness for longer"
	@echo "make lint          static checks: the include graph, and size limits (files ≤ 700 lines, functions ≤ 80)"

# Debian packages the build and the tests need (apt-get only for what is missing).
deps:
	@bash .ci/install-deps

# Optimised build of the product; executables land in build/bin/ (the tests build in build/dev).
build:
	@cmake --preset release >/dev/null
	@cmake --build --preset release --target kshard-operator kshard-sidecar kshard-counter kshardctl \
		kubectl-kshard

# The images of the Dockerfile's targets and of the test programs, daemonless (buildah), from base
# images made locally with mmdebstrap; an archive of each in build/images/ (images/build.sh).
images: deps
	@bash images/build.sh

# Each product image runs its executable (shared libraries, entry point, user): part of make test.
images-test: images
	@bash images/test.sh

# Debug build with AddressSanitizer and UndefinedBehaviorSanitizer, for the unit tests.
build-dev:
	@cmake --preset dev >/dev/null
	@cmake --build --preset dev

unit-test: build-dev
	@ctest --preset dev -j 2

# The chart: helm lint, and its CRDs are those in crds/.
chart-test:
	@bash e2e/chart-test.sh

# Property-based tests of the sidecar's APIs against docs/openapi/sidecar.yaml (Schemathesis from
# PyPI, in a venv under build/), on the sanitizer build of the unit tests.
api-test: build-dev
	@KSHARD_SIDECAR=build/dev/bin/kshard-sidecar bash e2e/schemathesis/run.sh

# The Go and Python SDKs' tests, and the app contract suite (sdk/contract) against the C++, Go and
# Python counters (sdk/test.sh).
sdk-test: build
	@KSHARD_COUNTER_BIN=build/bin/kshard-counter bash sdk/test.sh

# Every test: the images, the SDKs, the local cluster's own tests, kshard on the local cluster,
# unit and component tests, a short run of every fuzz harness, the API property tests. Ordered to
# keep the cores busy (tools/test.sh): the sanitizer and fuzz builds run at idle priority while
# the cluster suites wait on pods and faults.
test: deps
	@MAKE="$(MAKE)" bash tools/test.sh

# kshard on the local cluster: kube/'s integration tests, the operator's, the end-to-end scenarios.
e2e-test: build
	@bash e2e/run-all.sh

kube-e2e: build-dev
	@bash e2e/kube/run.sh

operator-e2e: build-dev
	@bash e2e/operator/run.sh

scenarios: build
	@bash e2e/scenarios/run.sh

# The randomized fault suite (e2e/nemesis, docs/reliability.md): faults of a seeded schedule under
# load for DURATION on the counter APP (cpp, or go: the Go SDK's), then the history checks. SEED defaults to a random one, printed first; the
# same SEED replays the same schedule. Report: e2e/nemesis/report/nemesis.md. `make test` runs a
# short one with a fixed seed (e2e/run-all.sh).
SEED ?=
DURATION ?= 30m
APP ?= cpp
chaos: build
	@SEED="$(SEED)" DURATION="$(DURATION)" COUNTER_APP="$(APP)" bash e2e/nemesis/run.sh

# Builds everything, starts the local cluster, installs kshard with helm, runs the counter example.
demo: deps
	@bash e2e/demo.sh

# The local cluster's own acceptance tests (control plane, the real node, faults, cleanup).
cluster-test:
	@bash e2e/cluster/test.sh

cluster-up:
	@bash e2e/cluster/up.sh

cluster-down:
	@bash e2e/cluster/down.sh

# Every benchmark, from the optimised build; figures go to docs/benchmarks.md by hand.
bench: build
	@echo "== planner (sharding/planner.h)"
	@build/bin/planner_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
	@echo "== rebalance simulation (kshardctl simulate)"
	@KSHARDCTL=build/bin/kshardctl bash bench/simulate/run.sh
	@echo "== sidecar data path (direct, nginx pair, sidecar pair; wrk and fortio on loopback)"
	@bash bench/datapath/run.sh
	@echo "== sidecar drain (stopping 50,000 entities on SIGTERM)"
	@bash bench/datapath/drain.sh
	@echo "== operator at scale (1,000 stub pods, 10,000 shards, on the local cluster)"
	@bash bench/operator/run.sh

# Every fuzz harness for a few seconds from its seed corpus (clang, ASan+UBSan, build/fuzz/).
fuzz-smoke:
	@bash fuzz/run.sh smoke

# Every fuzz harness for FUZZ_SECONDS (default 300), growing build/fuzz/corpus-run/.
fuzz:
	@bash fuzz/run.sh long

# Static checks: the include graph between the top-level folders (tools/check-includes.py), and
# the size limits of production code, no file over 700 lines and no function over 80 (lizard,
# pinned by tools/lint/requirements.txt, in a venv under build/lint/: tools/lint.sh).
lint:
	@python3 tools/check-includes.py
	@bash tools/lint.sh

format:
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf build
