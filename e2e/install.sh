#!/usr/bin/env bash
# Installs kshard and the counter example on the local cluster (e2e/cluster), the way a user does:
# `helm install` of charts/kshard, then the annotated counter Deployment. `make demo` and the
# end-to-end scenarios (e2e/scenarios) both start from here.
#
#   e2e/install.sh            build (release), cluster-up, helm install, counter, wait until Ready
#   e2e/install.sh --no-build use the executables already in build/bin
#
# Environment: KSHARD_NAMESPACE (kshard-system), COUNTER_REPLICAS (3), COUNTER_APP (cpp): which
# counter, a row of e2e/counter-apps.sh (cpp: examples/counter in namespace demo; go:
# examples/go-counter in demo-go); its manifest fixes the namespace and the names.
# Every wait has a deadline and says what did not happen.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/cluster/lib.sh"
source "$HERE/counter-apps.sh"
cd "$REPO_ROOT"

KSHARD_NAMESPACE="${KSHARD_NAMESPACE:-kshard-system}"
select_counter_app "${COUNTER_APP:-cpp}"
COUNTER_REPLICAS="${COUNTER_REPLICAS:-3}"
build=1
[[ "${1:-}" == --no-build ]] && build=0

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

if ((build)); then
  say "building kshard (make build; executables in build/bin) beside the local cluster's programs"
  bash "$HERE/cluster/build-beside.sh" make --no-print-directory build
fi
for bin in kshard-operator kshard-sidecar kshard-counter kshardctl; do
  [[ -x build/bin/$bin ]] || die "build/bin/$bin is missing: run make build"
done

say "starting the local cluster (make cluster-up)"
make --no-print-directory cluster-up
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
export PATH="$HELM_BIN:$PATH"

say "helm install kshard (charts/kshard) into namespace $KSHARD_NAMESPACE"
helm upgrade --install kshard charts/kshard --namespace "$KSHARD_NAMESPACE" --create-namespace \
  --wait --timeout 180s >/dev/null
wait_for 120 "the kshard webhook has no ready endpoint in $KSHARD_NAMESPACE" \
  bash -c "kubectl -n '$KSHARD_NAMESPACE' get endpointslices -l kubernetes.io/service-name=kshard-webhook \
    -o jsonpath='{.items[*].endpoints[?(@.conditions.ready==true)].addresses[0]}' | grep -q ."

say "deploying the counter example $COUNTER_APP ($COUNTER_MANIFEST: $COUNTER_REPLICAS replicas, 300 shards)"
if ! kubectl get namespace "$COUNTER_NAMESPACE" >/dev/null 2>&1; then
  # A new ShardMap numbers its epochs from 1 again, while counters saved under an earlier one
  # (the hostPath outlives clusters) carry higher epochs, which the counter's fenced store
  # (examples/counter/counter_store.h) refuses to overwrite: start the example's state afresh.
  rm -rf "$COUNTER_STATE/state"
fi
# The counter's store (a hostPath standing in for a database) is written by its pods as the
# image's user, 65532.
mkdir -p "$COUNTER_STATE"
chown -R 65532:65532 "$COUNTER_STATE"
kubectl apply -f "$COUNTER_MANIFEST" >/dev/null
if [[ "$COUNTER_REPLICAS" != 3 ]]; then
  kubectl -n "$COUNTER_NAMESPACE" scale "deployment/$COUNTER_NAME" --replicas="$COUNTER_REPLICAS" >/dev/null
fi
kubectl -n "$COUNTER_NAMESPACE" rollout status "deployment/$COUNTER_NAME" --timeout=180s >/dev/null ||
  die "the $COUNTER_NAME Deployment did not become available within 180 s (kubectl -n $COUNTER_NAMESPACE describe pods)"
wait_for 180 "ShardMap $COUNTER_NAMESPACE/$COUNTER_NAME did not become Ready (kubectl -n $COUNTER_NAMESPACE describe shardmap $COUNTER_NAME)" \
  bash -c "kubectl -n '$COUNTER_NAMESPACE' get shardmap '$COUNTER_NAME' \
    -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True" ||
  { shard_map_report "$COUNTER_NAMESPACE" "$COUNTER_NAME"; exit 1; }
wait_for 180 "ShardMap $COUNTER_NAMESPACE/$COUNTER_NAME did not become Balanced" \
  bash -c "kubectl -n '$COUNTER_NAMESPACE' get shardmap '$COUNTER_NAME' \
    -o jsonpath='{.status.conditions[?(@.type==\"Balanced\")].status}' | grep -qx True" ||
  { shard_map_report "$COUNTER_NAMESPACE" "$COUNTER_NAME"; exit 1; }
# The node runs them as containers of kshard's images: containerd's container IDs, and crictl ps
# (which names an image by its ID; crictl images gives the ID's names) lists each product image.
ids="$(kubectl get pods -n "$KSHARD_NAMESPACE" -o jsonpath='{range .items[*].status.containerStatuses[*]}{.containerID}{"\n"}{end}')"
ids+=$'\n'"$(kubectl get pods -n "$COUNTER_NAMESPACE" -o jsonpath='{range .items[*].status.containerStatuses[*]}{.containerID}{"\n"}{end}{range .items[*].status.initContainerStatuses[*]}{.containerID}{"\n"}{end}')"
bad="$(grep -v '^containerd://' <<<"$ids" || true)"
[[ -z "$bad" ]] || die "containers not run by containerd: $bad"
images="$(join <("$CLUSTER_DIR/crictl" ps -o json | jq -r '.containers[].imageRef' | sort -u) \
  <("$CLUSTER_DIR/crictl" images -o json | jq -r '.images[] | .id as $id | .repoTags[] | "\($id) \(.)"' | sort))"
for want in kshard/operator kshard/sidecar "$COUNTER_IMAGE"; do
  grep -q "/$want:" <<<"$images" || die "crictl ps lists no container of $want (its images: $images)"
done
say "kshard and the counter ($COUNTER_APP) are running, in containers of kshard's images (.cluster/crictl ps)"
