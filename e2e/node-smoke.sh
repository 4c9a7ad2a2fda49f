#!/usr/bin/env bash
# kshard on the real node (KSHARD_NODE=kubelet, e2e/cluster/README.md): its images under the
# kubelet, containerd and runc. Installs the chart and the counter (e2e/install.sh), then checks
# what the node agent only emulated:
#   - every pod's containers are containerd's, from kshard's images (crictl ps);
#   - increments through random pods are all applied (the sidecars route them);
#   - the sidecar container SIGKILLed alone restarts in place (a new container ID), the pod
#     registers again, and no counter loses an increment;
#   - a rolling update 1.0.0 → 1.1.0 drains through the preStop hook and keeps every value.
# Leaves the cluster running (make cluster-down).
#
#   e2e/node-smoke.sh [--no-build]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/cluster/lib.sh"
source "$HERE/cluster/procs.sh"
source "$HERE/cluster/node.sh"
cd "$REPO_ROOT"
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
NS=demo
COUNTERS=100
# Counters of this run only (the counter store outlives runs).
PREFIX="smoke-$(date +%s)"
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

KSHARD_NODE=kubelet bash "$HERE/install.sh" "$@"

say "containers are containerd's, from kshard's images"
ids="$(kubectl get pods -n kshard-system -o jsonpath='{range .items[*].status.containerStatuses[*]}{.containerID}{"\n"}{end}')"
ids+=$'\n'"$(kubectl get pods -n "$NS" -o jsonpath='{range .items[*].status.containerStatuses[*]}{.containerID}{"\n"}{end}{range .items[*].status.initContainerStatuses[*]}{.containerID}{"\n"}{end}')"
grep -v '^containerd://' <<<"$ids" | grep . && fail "containers not run by containerd: see above"
# crictl ps names a container's image by its ID; crictl images gives the ID's names.
images="$(join <(crictl_ ps -o json | jq -r '.containers[].imageRef' | sort -u) \
  <(crictl_ images -o json | jq -r '.images[] | .id as $id | .repoTags[] | "\($id) \(.)"' | sort))"
for want in operator sidecar counter; do
  grep -q "/kshard/$want:" <<<"$images" || fail "crictl ps lists no container of kshard/$want (its images: $images)"
done
crictl_ ps
kubectl get pods -n "$NS" -o wide

# The counter's pods that are ready and not being deleted.
pod_ips() {
  kubectl -n "$NS" get pods -l app.kubernetes.io/name=counter -o json | jq -r '.items[]
    | select(.metadata.deletionTimestamp == null)
    | select(any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .status.podIP'
}
none_terminating() {
  [ -z "$(kubectl -n "$NS" get pods -l app.kubernetes.io/name=counter -o json |
    jq -r '.items[] | select(.metadata.deletionTimestamp != null) | .metadata.name')" ]
}
# increments <round>: one increment to each counter through a random pod; every one must succeed.
expected=0
increments() {
  local ips e ip
  mapfile -t ips < <(pod_ips)
  for e in $(seq 1 "$COUNTERS"); do
    ip=${ips[$((RANDOM % ${#ips[@]}))]}
    curl -sf --max-time 30 -X POST "http://$ip:8081/counters/$PREFIX-$e/increment" >/dev/null ||
      fail "increment of $PREFIX-$e through $ip failed ($1)"
  done
  expected=$((expected + 1))
}
# values_are <n>: every counter reads n.
values_are() {
  local ips e v
  mapfile -t ips < <(pod_ips)
  for e in $(seq 1 "$COUNTERS"); do
    v="$(curl -sf --max-time 30 "http://${ips[0]}:8081/counters/$PREFIX-$e" | jq -r .value)"
    [ "$v" = "$1" ] || fail "counter $PREFIX-$e reads $v, not $1"
  done
}
ready_and_balanced() {
  [ "$(kubectl -n "$NS" get shardmap counter -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] &&
    [ "$(kubectl -n "$NS" get shardmap counter -o jsonpath='{.status.conditions[?(@.type=="Balanced")].status}')" = True ]
}

say "$COUNTERS increments through random pods"
increments "first round"
values_are "$expected"

say "SIGKILL of one pod's sidecar container alone"
pod="$(kubectl -n "$NS" get pods -l app.kubernetes.io/name=counter -o jsonpath='{.items[0].metadata.name}')"
sidecar_id() {
  kubectl -n "$NS" get pod "$pod" -o jsonpath='{.status.initContainerStatuses[?(@.name=="kshard-sidecar")].containerID}'
}
before="$(sidecar_id)"
pid="$(crictl_ inspect "${before#containerd://}" | jq -r .info.pid)"
[ -n "$pid" ] && [ "$pid" != null ] || fail "no pid for the sidecar container $before"
kill -KILL "$pid"
restarted() { local now; now="$(sidecar_id)"; [ -n "$now" ] && [ "$now" != "$before" ]; }
wait_for 60 "the sidecar of $pod did not restart in place" restarted
wait_for 120 "the ShardMap did not become Ready and Balanced after the sidecar's restart" ready_and_balanced
increments "after the sidecar's restart"
values_are "$expected"
log "sidecar $before → $(sidecar_id); every counter reads $expected"

say "rolling update 1.0.0 → 1.1.0"
kubectl -n "$NS" patch deployment counter --type=json -p '[
  {"op":"replace","path":"/spec/template/metadata/labels/app.kubernetes.io~1version","value":"1.1.0"},
  {"op":"replace","path":"/spec/template/spec/containers/0/image","value":"kshard/counter:1.1.0"}]' >/dev/null
kubectl -n "$NS" rollout status deployment/counter --timeout=300s >/dev/null || fail "the rollout did not complete"
wait_for 180 "the old pods did not finish their drain and go" none_terminating
wait_for 180 "the ShardMap did not become Ready and Balanced after the rollout" ready_and_balanced
increments "after the rollout"
values_are "$expected"
say "the real node runs kshard: every check passed"
