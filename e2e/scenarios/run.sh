#!/usr/bin/env bash
# kshard's end-to-end scenarios (issue 8) on the local cluster (e2e/cluster): installs the chart
# and a counter example with e2e/install.sh, then runs the Go scenarios of e2e/scenarios/test
# under continuous load, in order, on that one installation. The executables must already be in
# build/bin (`make build`).
#
#   e2e/scenarios/run.sh                 fresh counter (the examples' namespaces are deleted
#                                        first), all scenarios
#   e2e/scenarios/run.sh --app go        the Go counter (examples/go-counter, sdk/go): a subset
#   e2e/scenarios/run.sh --keep          reuse the running installation as it is
#   e2e/scenarios/run.sh --delete-after  delete the counter's namespace at the end
#   e2e/scenarios/run.sh [--keep] -- <go test flags>, e.g. -- -run 'TestScenarios/(install|crash)'
#
# --app (or COUNTER_APP) names a row of e2e/counter-apps.sh; cpp, the C++ counter, by default.
# The C++ counter, the reference, runs every scenario. Any other app runs OTHER_APP_SCENARIOS
# (below); a -run among the go test flags replaces that choice.
#
# Report: e2e/scenarios/report/scenarios.md and scenarios.json (what each scenario measured),
# go-test.log (the test's output); another app's in report/<app>/. Pod logs:
# .cluster/logs/<namespace>/<pod>/<container>.log.
# Exit status: go test's (0 when every scenario passed).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../cluster/lib.sh"
source "$HERE/../counter-apps.sh"
cd "$REPO_ROOT"

# The scenarios of any app but the C++ counter: those that exercise the app's side of the
# contract under load (activations, stops and handoffs in traffic, a rolling update, a crash)
# and the single-owner check of the whole run's event log, a few minutes in all. Scale, the
# operator's failover, the API server outage and bad input test kshard itself, which the C++
# counter's run covers. The continuous load starts in install and ends in single-owner, and
# rolling-update starts by scaling to 3, so no scenario left out is needed by one that runs.
OTHER_APP_SCENARIOS='install|traffic|rolling-update|crash|single-owner'

keep=0
delete_after=0
app="${COUNTER_APP:-cpp}"
go_args=()
usage() { echo "usage: $0 [--app cpp|go] [--keep] [--delete-after] [-- go test flags]" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --app) (($# >= 2)) || usage; app="$2"; shift ;;
    --keep) keep=1 ;;
    --delete-after) delete_after=1 ;;
    --) shift; go_args=("$@"); break ;;
    *) usage ;;
  esac
  shift
done

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
select_counter_app "$app"
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
KUBECTL="$(kubectl_bin)"
run_args=()
report_dir="$HERE/report"
if [[ "$COUNTER_APP" != cpp ]]; then
  run_args=(-run "^TestScenarios\$/^($OTHER_APP_SCENARIOS)\$")
  report_dir="$HERE/report/$COUNTER_APP"
fi
say "scenarios of the $COUNTER_APP counter ($COUNTER_MANIFEST, namespace $COUNTER_NAMESPACE)"

setup_go
start=$(date +%s)
if ((!keep)); then
  # The scenarios start from a counter as a user first installs it (3 pods of 1.0.0, a new
  # ShardMap), not from what a previous run left (1.1.0, a shorter rebalanceInterval), and alone
  # on the node: no other example's pods share its cores.
  make --no-print-directory cluster-up
  for ns in $(counter_app_namespaces); do
    if "$KUBECTL" get namespace "$ns" >/dev/null 2>&1; then
      say "deleting namespace $ns (a previous run's counter)"
      delete_namespace "$ns"
    fi
  done
fi
if ((delete_after)); then
  # make test: the next suites run on the same node (2 cores), without this counter.
  trap 'say "deleting namespace $COUNTER_NAMESPACE (--delete-after)"; delete_namespace "$COUNTER_NAMESPACE"' EXIT
fi
COUNTER_APP="$COUNTER_APP" bash "$REPO_ROOT/e2e/install.sh" --no-build
install_seconds=$(($(date +%s) - start))

export KSHARD_REPO_ROOT="$REPO_ROOT" KSHARD_CLUSTER_DIR="$CLUSTER_DIR" KUBECTL
export COUNTER_APP COUNTER_NAMESPACE COUNTER_NAME COUNTER_IMAGE KSHARD_COUNTER_EVENT_LOG="$COUNTER_EVENT_LOG"
export KSHARD_REPORT_DIR="$report_dir"
export KSHARD_INSTALL_SECONDS="$install_seconds"
export KSHARD_COMMIT="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || true)"
mkdir -p "$KSHARD_REPORT_DIR"
rm -f "$KSHARD_REPORT_DIR/scenarios.md" "$KSHARD_REPORT_DIR/scenarios.json"

say "running the scenarios (go test ./test/); report in $KSHARD_REPORT_DIR"
cd "$HERE"
set +e
go test ./test/ -count=1 -timeout 40m -v "${run_args[@]}" "${go_args[@]}" 2>&1 | tee "$KSHARD_REPORT_DIR/go-test.log"
rc=${PIPESTATUS[0]}
set -e

if [[ -f "$KSHARD_REPORT_DIR/scenarios.md" ]]; then
  say "summary ($KSHARD_REPORT_DIR/scenarios.md)"
  sed -n '/^| #/,/^$/p' "$KSHARD_REPORT_DIR/scenarios.md" >&2
fi
log "scenarios of the $COUNTER_APP counter: go test exited with $rc after $(($(date +%s) - start)) s in all"
exit "$rc"
