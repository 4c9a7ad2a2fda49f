#!/usr/bin/env bash
# kshard-operator's tests against the local cluster (e2e/cluster): brings the cluster up when it
# is not answering, builds the operator and the stub pod program, installs the CRDs and
# runs the Go tests of e2e/operator/test, which start operator replicas as host processes (with
# the cluster's kubeconfig) and stub sidecars as real pods.
#
#   e2e/operator/run.sh [go test flags, e.g. -run TestCRD]
#
# Environment:
#   KSHARD_BUILD_DIR   CMake build directory to build kshard-operator in (default: build/dev,
#                      configured with the dev preset when missing)
#   KSHARD_OPERATOR_BIN  use this operator binary instead of building one
#
# Logs: the operators' in .cluster/logs/operator-e2e/, the pods' in .cluster/logs/<ns>/<pod>/.
# Exit status: go test's (0 when every test passed).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../cluster/lib.sh"
BUILD_DIR="${KSHARD_BUILD_DIR:-$REPO_ROOT/build/dev}"
cd "$REPO_ROOT"

say() { printf 'operator-e2e: %s\n' "$*" >&2; }

export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
if [[ ! -f "$KUBECONFIG" ]] || ! kubectl get --raw /readyz >/dev/null 2>&1; then
  say "the local cluster is not answering; starting it (make cluster-up)"
  make cluster-up
fi

if [[ -z "${KSHARD_OPERATOR_BIN:-}" ]]; then
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    [[ "$BUILD_DIR" == "$REPO_ROOT/build/dev" ]] || { say "$BUILD_DIR is not a configured build directory"; exit 2; }
    say "configuring $BUILD_DIR (preset dev)"
    cmake --preset dev >/dev/null
  fi
  say "building kshard-operator in $BUILD_DIR"
  cmake --build "$BUILD_DIR" --target kshard-operator
  KSHARD_OPERATOR_BIN="$(grep -E '^KSHARD_BIN_DIR:' "$BUILD_DIR/CMakeCache.txt" | cut -d= -f2)/kshard-operator"
fi
[[ -x "$KSHARD_OPERATOR_BIN" ]] || { say "no operator binary at $KSHARD_OPERATOR_BIN"; exit 2; }

setup_go
say "building the stub pod program (image kshard/operator-stub-pod, images/build.sh)"
(cd "$HERE" && go build -o bin/kshard-operator-stub-pod ./cmd/stub-pod)

say "installing the CRDs (crds/)"
kubectl apply -f "$REPO_ROOT/crds/" >/dev/null
kubectl wait --for condition=Established --timeout=60s crd/shardmaps.kshard.io crd/shardmapsegments.kshard.io >/dev/null

say "installing Schemathesis (the manager API's test)"
KSHARD_SCHEMATHESIS=$(bash "$REPO_ROOT/e2e/schemathesis/venv.sh")
export KSHARD_SCHEMATHESIS
export KSHARD_OPERATOR_BIN
export KSHARD_OPERATOR_LOGS="$CLUSTER_DIR/logs/operator-e2e"
mkdir -p "$KSHARD_OPERATOR_LOGS"
say "running the tests against $KUBECONFIG (operator: $KSHARD_OPERATOR_BIN)"
cd "$HERE"
exec go test -count=1 -v -timeout 20m ./test/ "$@"
