#!/usr/bin/env bash
# `make demo`: builds kshard, starts the local cluster, installs kshard with helm, runs the counter
# example, sends it traffic, rolls it from 1.0.0 to 1.1.0 and shows the ShardMap at each step.
# Leaves everything running; `make cluster-down` stops it.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/cluster/lib.sh"
cd "$REPO_ROOT"
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
export PATH="$HELM_BIN:$PATH"
NS=demo

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

start=$SECONDS
# The demo shows the C++ counter (demo/counter), whatever COUNTER_APP says.
COUNTER_APP=cpp bash "$HERE/install.sh" "$@"

say "kubectl get shardmaps -n $NS"
kubectl get shardmaps -n "$NS"
say "kubectl get pods -n $NS (each pod: the counter app and the injected kshard-sidecar)"
kubectl get pods -n "$NS" -o wide
kubectl get pods -n "$NS" -o custom-columns='POD:.metadata.name,CONTAINER IDS:.status.containerStatuses[*].containerID,SIDECAR:.status.initContainerStatuses[*].containerID'
say ".cluster/crictl ps (the node's containers, from kshard's images)"
"$CLUSTER_DIR/crictl" ps

pods() {
  kubectl -n "$NS" get pods -l app.kubernetes.io/name=counter \
    -o jsonpath='{range .items[?(@.status.podIP)]}{.status.podIP}{"\n"}{end}'
}

say "traffic: 100 counters x 5 increments, each sent to a random pod (the sidecars route it)"
mapfile -t ips < <(pods)
failed=0
for i in $(seq 1 5); do
  for e in $(seq 1 100); do
    ip=${ips[$((RANDOM % ${#ips[@]}))]}
    curl -sf -X POST "http://$ip:8081/counters/demo-$e/increment" >/dev/null || failed=$((failed + 1))
  done
done
ip=${ips[0]}
echo "requests: 500, failed: $failed"
echo "counter demo-7 read through $ip: $(curl -sf "http://$ip:8081/counters/demo-7")"
echo "its shard: kshardctl shard-of --shards 300 demo-7 -> $(build/bin/kshardctl shard-of --shards 300 demo-7)"

say "rolling update 1.0.0 -> 1.1.0 (maxSurge 1, maxUnavailable 1: old pods hold their shards until new ones register)"
t0=$SECONDS
kubectl -n "$NS" patch deployment counter --type=json -p '[
  {"op":"replace","path":"/spec/template/metadata/labels/app.kubernetes.io~1version","value":"1.1.0"},
  {"op":"replace","path":"/spec/template/spec/containers/0/image","value":"kshard/counter:1.1.0"}]' >/dev/null
kubectl -n "$NS" rollout status deployment/counter --timeout=300s
balanced() {
  kubectl -n "$NS" get shardmap counter \
    -o jsonpath='{.status.conditions[?(@.type=="Balanced")].status}' | grep -qx True
}
wait_for 180 "the ShardMap did not balance within 180 s after the rollout" balanced
echo "rollout and rebalance took $((SECONDS - t0)) s"
echo "counter demo-7 after the rollout: $(curl -sf "http://$(pods | head -1):8081/counters/demo-7")"

say "kubectl get shardmaps -n $NS"
kubectl get shardmaps -n "$NS"
say "kubectl describe shardmap counter -n $NS (conditions and events)"
kubectl describe shardmap counter -n "$NS" | sed -n '/Conditions:/,$p'

say "demo done in $((SECONDS - start)) s; the cluster keeps running"
cat <<EOF
  export KUBECONFIG=$KUBECONFIG
  kubectl get shardmaps -A -w               # watch assignments
  kubectl -n $NS scale deployment counter --replicas=5
  make cluster-down                          # stop everything
EOF
