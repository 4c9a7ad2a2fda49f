#!/usr/bin/env bash
# kshard's attack suite (issue 29), on the local cluster after e2e/install.sh (kshard in
# kshard-system, the counter in demo): a tenant of another namespace (kshard-attack) runs a pod
# that poses as a sidecar of a ShardMap of its own, registers, keeps what the operator sends it,
# and attacks demo/counter with it and with every token it can mint; plus the RBAC, the metrics,
# the drain, the ShardMap flood, floods of the manager API, a sidecar and the webhooks (memory
# and the Lease watched), and the webhook certificate's renewal. docs/security.md lists the tests
# and their results.
#
#   e2e/security/run.sh [go test flags, e.g. -run TestTheOperators]
#
# It leaves the cluster as it found it (the attacker's namespace is deleted at the end).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../cluster/lib.sh"
cd "$REPO_ROOT"
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
export KSHARD_CLUSTER_DIR="$CLUSTER_DIR"

kubectl get deployment -n kshard-system kshard-operator >/dev/null 2>&1 ||
  die "kshard is not installed in kshard-system (run e2e/install.sh first)"

setup_go
log "security: building the attacker (image kshard/attacker, images/build.sh)"
(cd "$HERE" && go build -o bin/kshard-attacker ./cmd/attacker)

cleanup() { kubectl delete namespace kshard-attack --ignore-not-found --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT
log "security: running the attacks against $KUBECONFIG"
cd "$HERE"
go test -count=1 -v -timeout 15m ./test/ "$@"
