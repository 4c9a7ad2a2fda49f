# Shared settings and helpers of the local cluster's scripts. Source it; it sets no shell options.
# Every path the cluster uses is defined here (README.md lists them).

CLUSTER_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$CLUSTER_SRC/../.." && pwd)"
# shellcheck source=versions.env
source "$CLUSTER_SRC/versions.env"

# Build caches live out of git, shared by every checkout and CI run on this machine.
KSHARD_CACHE="${KSHARD_CACHE:-$HOME/.cache/kshard}"
# Cluster state (certificates, etcd data, logs, pids) lives in the checkout, gitignored.
CLUSTER_DIR="${KSHARD_CLUSTER_DIR:-$REPO_ROOT/.cluster}"
TOOLS_BIN="$KSHARD_CACHE/bin/k8s-$KUBERNETES_VERSION"
ETCD_BIN="$KSHARD_CACHE/bin/etcd-$ETCD_VERSION"
HELM_BIN="$KSHARD_CACHE/bin/helm-$HELM_VERSION"
CRICTL_BIN="$KSHARD_CACHE/bin/crictl-$CRICTL_VERSION"
CLUSTER_BIN="$CLUSTER_SRC/bin"

# Network: one bridge, pods on 10.244.0.0/16, the host (API server, probes) on 10.244.0.1.
BRIDGE="${KSHARD_BRIDGE:-kshard0}"
BRIDGE_IP="10.244.0.1"
POD_CIDR="10.244.0.0/16"
SERVICE_CIDR="10.96.0.0/16"
APISERVER_PORT=6443
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23800
NODE_NAME="${KSHARD_NODE_NAME:-kshard-node}"
# The pods' network namespaces, as containerd names them.
NETNS_PREFIX="cni-"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# wait_for <seconds> <what did not happen> <command...>: runs the command once a second until it
# succeeds; after <seconds>, logs what did not happen and returns 1.
wait_for() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "error: after ${seconds}s: $what"
      return 1
    fi
    sleep 1
  done
}

# step <name> <command...>: runs one step of a suite that goes on after a failure (make test,
# e2e/run-all.sh): logs "== name", appends "ok    name (time)" or "FAIL  name (time, exit N)" to
# the array STEP_RESULTS, sets STEP_FAILED=1 on a failure, and returns the command's status.
STEP_RESULTS=()
STEP_FAILED=0
step() {
  local name=$1 start=$SECONDS status=0
  shift
  log "== $name"
  "$@" || status=$?
  local took
  took=$(duration_text $((SECONDS - start)))
  if ((status == 0)); then
    STEP_RESULTS+=("ok    $name ($took)")
  else
    STEP_RESULTS+=("FAIL  $name ($took, exit $status)")
    STEP_FAILED=1
  fi
  return "$status"
}

# duration_text <seconds>: "42 s", or "3 min 05 s".
duration_text() {
  if (($1 < 60)); then echo "$1 s"; else printf '%d min %02d s\n' $(($1 / 60)) $(($1 % 60)); fi
}

# Runs "$@" and reports how long it took, under a label.
timed() {
  local label="$1" start end
  shift
  start=$(date +%s)
  log "$label ..."
  "$@"
  end=$(date +%s)
  log "$label: done in $((end - start)) s"
}

# go_version_ok <go binary>: true when that Go is at least GO_TOOLCHAIN_VERSION.
go_version_ok() {
  local have want
  have="$("$1" env GOVERSION 2>/dev/null)" || return 1
  want="$GO_TOOLCHAIN_VERSION"
  [ "$(printf '%s\n%s\n' "${want#go}" "${have#go}" | sort -V | head -n1)" = "${want#go}" ]
}

# Puts a Go toolchain new enough for Kubernetes first on PATH: the machine's if it is recent
# enough, otherwise the pinned toolchain, which the machine's Go (1.21 or later) fetches itself
# from its module proxy (GOTOOLCHAIN). Also points the module and build caches into KSHARD_CACHE.
setup_go() {
  export GOMODCACHE="$KSHARD_CACHE/go/mod"
  export GOCACHE="$KSHARD_CACHE/go/build"
  # Modules are pinned by the committed go.sum files; the checksum database is out of reach here.
  # (GOSUMDB=off would also refuse the toolchain download: GONOSUMDB alone skips the database.)
  export GOFLAGS="-mod=readonly -buildvcs=false"
  export GONOSUMDB="*"
  unset GOSUMDB
  export CGO_ENABLED=0
  local go_bin
  for go_bin in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go; do
    [ -n "$go_bin" ] && [ -x "$go_bin" ] || continue
    export PATH="$(dirname "$go_bin"):$PATH"
    if go_version_ok "$go_bin"; then
      export GOTOOLCHAIN=local
      return 0
    fi
    log "$("$go_bin" env GOVERSION) is older than $GO_TOOLCHAIN_VERSION: using $GO_TOOLCHAIN_VERSION (GOTOOLCHAIN)"
    export GOTOOLCHAIN="$GO_TOOLCHAIN_VERSION"
    go_version_ok "$go_bin" || die "Go could not switch to $GO_TOOLCHAIN_VERSION; install Go $GO_TOOLCHAIN_VERSION or later"
    return 0
  done
  die "no Go on this machine: install Go $GO_TOOLCHAIN_VERSION or later (any Go from 1.21 on fetches it)"
}

# The cgroup v2 hierarchy's mount point (runc puts every container's processes in it too).
cgroup2_root() {
  awk '{ for (i = 1; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo | head -n1
}

# kubectl: the machine's, else the one built with the control plane.
kubectl_bin() {
  if command -v kubectl >/dev/null 2>&1; then command -v kubectl; else echo "$TOOLS_BIN/kubectl"; fi
}

# shard_map_report <namespace> <ShardMap>: what a failed wait on a ShardMap needs to be understood,
# on stderr: its conditions, its registered pods (name, uid, version, shards) and the pods of the
# namespace as the API shows them (uid, version label, phase, terminating, owner, age).
shard_map_report() {
  local ns=$1 name=$2 kubectl
  kubectl="$(kubectl_bin)"
  {
    echo "ShardMap $ns/$name:"
    "$kubectl" -n "$ns" get shardmap "$name" -o json 2>&1 | jq -r '
      (.status.conditions[]? | "  condition \(.type)=\(.status) \(.reason): \(.message)"),
      (.status.pods[]? | "  registered \(.name) uid \(.uid) version \(.version) shards \(.shards)")' 2>&1
    echo "pods of namespace $ns:"
    "$kubectl" -n "$ns" get pods -o json 2>&1 | jq -r '.items[] |
      "  \(.metadata.name) uid \(.metadata.uid) version \(.metadata.labels["app.kubernetes.io/version"] // "-")" +
      " phase \(.status.phase) terminating \(.metadata.deletionTimestamp // "no")" +
      " owner \([.metadata.ownerReferences[]? | .kind + "/" + .name] | join(",")) created \(.metadata.creationTimestamp)"' 2>&1
  } >&2 || true
}

# delete_namespace <namespace>: deletes the namespace (KUBECONFIG's cluster) and waits until it is
# gone, within 4 minutes. Its pods are deleted first, and waited for: the namespace controller
# waits half the longest grace period among pods it finds still terminating before it looks
# again (52 s for kshard's pods, whose grace period covers a drain), while the pods themselves end
# a few seconds after their drains.
delete_namespace() {
  local ns=$1 kubectl
  kubectl="$(kubectl_bin)"
  "$kubectl" get namespace "$ns" >/dev/null 2>&1 || return 0
  "$kubectl" -n "$ns" delete deployments,replicasets,statefulsets,pods --all --wait=false >/dev/null
  "$kubectl" -n "$ns" wait --for=delete pods --all --timeout=180s >/dev/null ||
    die "the pods of namespace $ns did not end within 180 s (kubectl -n $ns get pods)"
  "$kubectl" delete namespace "$ns" --wait --timeout=60s >/dev/null ||
    die "namespace $ns was not deleted within 60 s of its pods' end (kubectl get all -n $ns)"
}
