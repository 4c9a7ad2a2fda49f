# kshard: the user's entry points. `make demo` and `make test` are the two commands the README
# opens with; everything else is a step of theirs.
SHELL := /bin/bash
.DEFAULT_GOAL := build

.PHONY: build build-dev unit-test test cluster-test e2e-test cluster-up cluster-down cluster-tools \
        demo bench fuzz fuzz-smoke format clean help

help:
	@echo "make demo          build, start the local cluster, install kshard, run the counter example"
	@echo "make test          every test: unit and component (ASan+UBSan), cluster, end-to-end"
	@echo "make build         optimised build; executables in build/bin/"
	@echo "make unit-test     unit and component tests only"
	@echo "make cluster-up    start the local Kubernetes cluster (.cluster/kubeconfig)"
	@echo "make cluster-down  stop it and remove everything it created"
	@echo "make bench         run the benchmarks (figures go to docs/benchmarks.md)"
	@echo "make fuzz          run every fuzz harness for longer"

# Optimised build of everything; executables land in build/bin/.
build:
	@cmake --preset release >/dev/null
	@cmake --build --preset release

# Debug build with AddressSanitizer and UndefinedBehaviorSanitizer, for the unit tests.
build-dev:
	@cmake --preset dev >/dev/null
	@cmake --build --preset dev

unit-test: build-dev
	@ctest --preset dev -j 2

test: unit-test cluster-test

# The local cluster's own acceptance tests (control plane, node agent, pods as processes).
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

format:
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf build
