#!/usr/bin/env bash
# Runs kube/'s integration tests (tests/kube/kube_integration_test) against the local cluster of
# e2e/cluster: brings the cluster up when it is not answering, builds the test binary, runs it.
#
#   e2e/kube/run.sh [gtest flags, e.g. --gtest_filter=*Watch*]
#
# Environment:
#   KSHARD_BUILD_DIR   the CMake build directory to build in (default: build/dev, `make build-dev`'s)
#   KUBECONFIG         ignored: the tests always use the local cluster's .cluster/kubeconfig
#                      (set KSHARD_KUBE_TEST_KUBECONFIG to aim them elsewhere, at your own risk:
#                      the watch test restarts the API server through e2e/cluster/apiserver.sh)
#
# Exit status: the test binary's (0 when every test passed).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD_DIR="${KSHARD_BUILD_DIR:-$ROOT/build/dev}"
CLUSTER_DIR="${KSHARD_CLUSTER_DIR:-$ROOT/.cluster}"
cd "$ROOT"

log() { printf 'kube-e2e: %s\n' "$*" >&2; }

if [[ -n "${KSHARD_KUBE_TEST_KUBECONFIG:-}" ]]; then
  export KUBECONFIG="$KSHARD_KUBE_TEST_KUBECONFIG"
else
  export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
  if [[ ! -f "$KUBECONFIG" ]] || ! kubectl get --raw /readyz >/dev/null 2>&1; then
    log "the local cluster is not answering; starting it (make cluster-up)"
    make cluster-up
  fi
fi
export KSHARD_APISERVER_CTL="$ROOT/e2e/cluster/apiserver.sh"

if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  if [[ "$BUILD_DIR" != "$ROOT/build/dev" ]]; then
    log "$BUILD_DIR is not a configured build directory"
    exit 2
  fi
  log "configuring $BUILD_DIR (preset dev)"
  cmake --preset dev >/dev/null
fi
log "building kube_integration_test in $BUILD_DIR"
cmake --build "$BUILD_DIR" --target kube_integration_test

log "running against $KUBECONFIG"
exec "$BUILD_DIR/tests/bin/kube_integration_test" "$@"
