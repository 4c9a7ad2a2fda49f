#!/usr/bin/env bash
# `make e2e-test`: kshard on the local cluster. Runs every suite even when one fails, prints how
# long each took, stops the cluster at the end and fails when any suite failed.
#   1. chart checks (e2e/chart-test.sh)
#   2. kube/'s integration tests (e2e/kube/run.sh)
#   3. the operator's cluster tests (e2e/operator/run.sh)
#   4. the end-to-end scenarios (e2e/scenarios/run.sh; needs `make build`)
#   5. a subset of them on the Go counter (examples/go-counter, written with sdk/go), whose
#      namespace is deleted at the end
#   6. the randomized fault suite, 4 minutes of faults of a fixed seed (e2e/nemesis/run.sh;
#      `make chaos` runs a longer one)
#   7. the attack suite: another tenant against demo/counter (e2e/security/run.sh)
#   8. the chart's life: untouched pods, helm test, upgrade, uninstall (e2e/chart-lifecycle.sh)
# KSHARD_KEEP_CLUSTER=1 leaves the cluster running for a look at .cluster/logs and kubectl.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/cluster/lib.sh"
cd "$REPO_ROOT"

# Every suite runs the release build (`make build`): kube/'s and the operator's build their test
# binary and take the operator from build/release unless KSHARD_BUILD_DIR names another build
# (build/dev, `make build-dev`, runs them under ASan and UBSan).
export KSHARD_BUILD_DIR="${KSHARD_BUILD_DIR:-$REPO_ROOT/build/release}"

finish() {
  if [[ "${KSHARD_KEEP_CLUSTER:-0}" != 1 ]]; then
    bash "$HERE/cluster/down.sh" >/dev/null 2>&1 || log "warning: make cluster-down failed"
  fi
  log "== end-to-end summary"
  printf '  %s\n' "${STEP_RESULTS[@]}" >&2
}
trap finish EXIT

step "chart checks" bash "$HERE/chart-test.sh"
step "cluster up" bash "$HERE/cluster/up.sh"
step "kube/ integration" bash "$HERE/kube/run.sh"
step "operator on the cluster" bash "$HERE/operator/run.sh"
step "end-to-end scenarios" bash "$HERE/scenarios/run.sh" --app cpp
# The Go counter runs alone on the node (run.sh deletes the C++ counter's namespace first; the
# nemesis installs it afresh anyway), and its namespace goes at the end of its step, so that
# its pods do not share the node's 2 cores with the next suites'.
step "end-to-end scenarios, Go counter (sdk/go)" bash "$HERE/scenarios/run.sh" --app go --delete-after
# Seed 93's first four minutes hold eleven kinds of fault, force delete and container kills among
# them (e2e/nemesis/schedule); NEMESIS_SEED and NEMESIS_DURATION override.
step "randomized faults (nemesis)" bash "$HERE/nemesis/run.sh" --app cpp --seed "${NEMESIS_SEED:-93}" \
  --duration "${NEMESIS_DURATION:-4m}"
step "install kshard and the counter" env COUNTER_APP=cpp bash "$HERE/install.sh" --no-build
step "attack suite" bash "$HERE/security/run.sh"
step "chart lifecycle" bash "$HERE/chart-lifecycle.sh"
exit $STEP_FAILED
