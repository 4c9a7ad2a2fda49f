#!/usr/bin/env bash
# kshard's randomized fault suite, the "nemesis" (issue 28), on the local cluster (e2e/cluster):
# installs the chart and the counter example afresh with e2e/install.sh, then runs
# e2e/nemesis/cmd/nemesis: continuous load on the counters while a seeded schedule injects faults
# (container kills, freezes, partitions, force deletes, leader deletion, API server restarts,
# scaling, rollouts and rollbacks), then every fault healed, a quiet period, and the checks of the
# whole history. The executables must already be in build/bin (`make build`). Needs root.
#
#   e2e/nemesis/run.sh [--seed N] [--duration 5m] [--app cpp|go] [--keep] [-- nemesis flags, e.g. -rate 30]
#
# SEED and DURATION in the environment are the defaults of --seed and --duration (a random seed,
# 30m: `make chaos`); the seed is printed first, and the same seed replays the same schedule.
# --keep reuses the running installation instead of a fresh one. --app (or COUNTER_APP) names the
# counter under load, a row of e2e/counter-apps.sh: cpp (examples/counter, the default) or go
# (examples/go-counter, written with sdk/go).
# Report: e2e/nemesis/report/nemesis.md (per fault kind: count, failed requests by code, recovery,
# overlaps, lost), nemesis.json, history.jsonl (every request), nemesis.log (this run's output).
# Exit status: 0 when every check passed, 1 on a violation or a problem of the run, 2 when it
# could not run.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../cluster/lib.sh"
source "$HERE/../counter-apps.sh"
cd "$REPO_ROOT"

seed="${SEED:-}"
duration="${DURATION:-30m}"
keep=0
app="${COUNTER_APP:-cpp}"
extra=()
while (($#)); do
  case "$1" in
    --seed) seed="$2"; shift ;;
    --duration) duration="$2"; shift ;;
    --keep) keep=1 ;;
    --app) app="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [--seed N] [--duration 5m] [--app cpp|go] [--keep] [-- nemesis flags]" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$seed" ]]; then
  seed=$(((RANDOM * 32768 + RANDOM) % 1000000))
fi
[[ "$seed" =~ ^[0-9]+$ ]] || die "--seed must be a number, got '$seed'"
select_counter_app "$app"
replay="make chaos SEED=$seed DURATION=$duration APP=$COUNTER_APP"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
say "nemesis: seed $seed, duration $duration, the $COUNTER_APP counter (replay: $replay)"
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
KUBECTL="$(kubectl_bin)"

setup_go
# The checker's and the schedule's own tests first (hand-made histories that must pass and fail),
# and those of the scenarios' packages the checks use.
say "unit tests of the nemesis and of the packages its checks use"
(cd "$HERE" && go test -count=1 ./...) || die "the nemesis's unit tests failed"
(cd "$HERE/../scenarios" && go test -count=1 ./eventlog/ ./load/ ./shardmap/ ./shardid/) ||
  die "the unit tests of e2e/scenarios' packages failed"
(cd "$HERE/../support" && go test -count=1 ./...) || die "the unit tests of e2e/support failed"

start=$(date +%s)
make --no-print-directory cluster-up
if ((!keep)) && "$KUBECTL" get namespace "$COUNTER_NAMESPACE" >/dev/null 2>&1; then
  # A fresh counter: 3 pods of 1.0.0 and a new ShardMap, not what a previous run left.
  say "deleting namespace $COUNTER_NAMESPACE (the previous run's counter)"
  delete_namespace "$COUNTER_NAMESPACE"
fi
COUNTER_APP="$COUNTER_APP" bash "$REPO_ROOT/e2e/install.sh" --no-build

export KSHARD_REPO_ROOT="$REPO_ROOT" KSHARD_CLUSTER_DIR="$CLUSTER_DIR" COUNTER_NAMESPACE COUNTER_NAME
export KSHARD_COUNTER_EVENT_LOG="$COUNTER_EVENT_LOG"
export KSHARD_COMMIT="$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || true)"
REPORT_DIR="$HERE/report"
mkdir -p "$REPORT_DIR"
rm -f "$REPORT_DIR"/nemesis.{md,json,log} "$REPORT_DIR/history.jsonl"

say "running the nemesis (install took $(($(date +%s) - start)) s); report in $REPORT_DIR"
cd "$HERE"
set +e
go run ./cmd/nemesis -seed "$seed" -duration "$duration" -report "$REPORT_DIR" -replay "$replay" "${extra[@]}" \
  2>&1 | tee "$REPORT_DIR/nemesis.log"
rc=${PIPESTATUS[0]}
set -e
if [[ -f "$REPORT_DIR/nemesis.md" ]]; then
  say "summary ($REPORT_DIR/nemesis.md)"
  sed -n '1,/^## Checks/p' "$REPORT_DIR/nemesis.md" | head -n 40 >&2
fi
log "nemesis: seed $seed exited with $rc after $(($(date +%s) - start)) s in all; replay: $replay"
exit "$rc"
