#!/usr/bin/env bash
# The operator at scale (docs/benchmarks.md "Operator at scale"): the release kshard-operator on
# the local cluster (e2e/cluster) with PODS stub pods registering against one ShardMap of SHARDS
# shards, then a rolling update of every pod (maxSurge 25 %, maxUnavailable 0), with the map's
# consumers measured on the wire throughout: "full" ones (today's sidecar, a watch of the whole
# ShardMap; a sample of pods, extrapolated) and "delta" ones (the new sidecar, a metadata-only
# watch and the changes from the operator; one per pod). See bench/operator/main.go for what is
# created and measured.
#
#   bench/operator/run.sh                       # 1,000 pods, 10,000 shards, rollout, both consumers
#   PODS=100 SHARDS=1000 bench/operator/run.sh  # smaller
#   bench/operator/run.sh -consumers delta -full-sample 5 -rollout=false
#   bench/operator/run.sh -operator-flags "--kube-qps=200 --kube-burst=400"
#
# Brings the cluster up when it is not answering (and leaves it up). Extra arguments go to the
# benchmark program. Output: the table on stdout, a CSV row appended to
# build/bench/operator/results.csv, the operator's log in build/bench/operator/.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../../e2e/cluster/lib.sh"
cd "$REPO_ROOT"
out="$REPO_ROOT/build/bench/operator"
operator="${KSHARD_OPERATOR_BIN:-$REPO_ROOT/build/bin/kshard-operator}"
mkdir -p "$out"

if [[ ! -x "$operator" ]]; then
  log "building kshard-operator (release preset)"
  cmake --preset release >/dev/null
  cmake --build --preset release --target kshard-operator
fi

export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
if [[ ! -f "$KUBECONFIG" ]] || ! kubectl get --raw /readyz >/dev/null 2>&1; then
  log "the local cluster is not answering; starting it (make cluster-up)"
  make --no-print-directory cluster-up
fi
kubectl apply -f crds/ >/dev/null
kubectl wait --for condition=Established --timeout=60s crd/shardmaps.kshard.io crd/shardmapsegments.kshard.io >/dev/null

# 10,000 stub pods are 10,000 listeners in the benchmark and as many connections from the
# operator: more descriptors than a shell's usual limit (root may raise it).
ulimit -Hn 262144 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"

setup_go
log "building the benchmark program"
(cd "$HERE" && go build -o "$out/kshard-operator-scale" .)

log "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$out/kshard-operator-scale" -operator "$operator" -log-dir "$out" -csv "$out/results.csv" \
  -pods "${PODS:-1000}" -shards "${SHARDS:-10000}" "$@"
