#!/usr/bin/env bash
# kshard's end-to-end scenarios (issue 8) on the local cluster (e2e/cluster): installs the chart
# and the counter example with e2e/install.sh, then runs the Go scenarios of e2e/scenarios/test
# under continuous load, in order, on that one installation. The executables must already be in
# build/bin (`make build`).
#
#   e2e/scenarios/run.sh                 fresh counter (its namespace is deleted first), all scenarios
#   e2e/scenarios/run.sh --keep          reuse the running installation as it is
#   e2e/scenarios/run.sh [--keep] -- <go test flags>, e.g. -- -run 'TestScenarios/(install|crash)'
#
# Report: e2e/scenarios/report/scenarios.md and scenarios.json (what each scenario measured),
# go-test.log (the test's output). Pod logs: .cluster/logs/<namespace>/<pod>/<container>.log.
# Exit status: go test's (0 when every scenario passed).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../cluster/lib.sh"
cd "$REPO_ROOT"

keep=0
go_args=()
while (($#)); do
  case "$1" in
    --keep) keep=1 ;;
    --) shift; go_args=("$@"); break ;;
    *) echo "usage: $0 [--keep] [-- go test flags]" >&2; exit 2 ;;
  esac
  shift
done

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
COUNTER_NAMESPACE="${COUNTER_NAMESPACE:-demo}"
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
KUBECTL="$(kubectl_bin)"

setup_go
start=$(date +%s)
if ((!keep)); then
  # The scenarios start from a counter as a user first installs it (3 pods of 1.0.0, a new
  # ShardMap), not from what a previous run left (1.1.0, a shorter rebalanceInterval).
  make --no-print-directory cluster-up
  if "$KUBECTL" get namespace "$COUNTER_NAMESPACE" >/dev/null 2>&1; then
    say "deleting namespace $COUNTER_NAMESPACE (the previous run's counter)"
    delete_namespace "$COUNTER_NAMESPACE"
  fi
fi
bash "$REPO_ROOT/e2e/install.sh" --no-build
install_seconds=$(($(date +%s) - start))

export KSHARD_REPO_ROOT="$REPO_ROOT" KSHARD_CLUSTER_DIR="$CLUSTER_DIR" KUBECTL
export KSHARD_REPORT_DIR="$HERE/report"
export KSHARD_INSTALL_SECONDS="$install_seconds"
export KSHARD_COMMIT="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || true)"
mkdir -p "$KSHARD_REPORT_DIR"
rm -f "$KSHARD_REPORT_DIR/scenarios.md" "$KSHARD_REPORT_DIR/scenarios.json"

say "running the scenarios (go test ./test/); report in $KSHARD_REPORT_DIR"
cd "$HERE"
set +e
go test ./test/ -count=1 -timeout 40m -v "${go_args[@]}" 2>&1 | tee "$KSHARD_REPORT_DIR/go-test.log"
rc=${PIPESTATUS[0]}
set -e

if [[ -f "$KSHARD_REPORT_DIR/scenarios.md" ]]; then
  say "summary ($KSHARD_REPORT_DIR/scenarios.md)"
  sed -n '/^| #/,/^$/p' "$KSHARD_REPORT_DIR/scenarios.md" >&2
fi
log "scenarios: go test exited with $rc after $(($(date +%s) - start)) s in all"
exit "$rc"
