#!/usr/bin/env bash
# make cluster-test: the local cluster's acceptance tests. Brings the cluster up (if it is not),
# checks that starting it twice is harmless, runs the Go tests of e2e/cluster/test against it,
# takes it down (twice: the second must be harmless, the first after a crash of the kubelet and
# containerd with an orphan held) and verifies that nothing is left behind: no process (orphaned
# pods' and containerd's shims included), network namespace, bridge, mount, cgroup, the node's
# service rule or a fault-injection rule.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$CLUSTER_SRC/procs.sh"
source "$CLUSTER_SRC/node.sh"

test_start=$(date +%s)
cgroot="$(cgroup2_root)"

# Everything on this machine that the cluster may create.
leftovers() {
  ip netns list 2>/dev/null | awk '{print "netns " $1}' | grep " $NETNS_PREFIX" || true
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^$BRIDGE\$" | sed 's/^/link /' || true
  grep -E " /run/netns/$NETNS_PREFIX| $REPO_ROOT| $NODE_RUN" /proc/self/mountinfo | awk '{print "mount " $5}' || true
  [ -e "$NODE_RUN" ] && echo "folder $NODE_RUN"
  node_kubepods | sed 's/^/cgroup /'
  pgrep -af "containerd(-shim-runc-v2)? .*$CONTAINERD_SOCK|containerd --config $CLUSTER_DIR/" | sed 's/^/process /' || true
  # The node's service rule is the only host rule; the fault tool's live in the pods' namespaces.
  iptables-save 2>/dev/null | grep KSHARD | sed 's/^/host iptables /' || true
  local p exe
  for p in /proc/[0-9]*; do
    exe="$(readlink "$p/exe" 2>/dev/null)" || continue
    case "$exe" in
      "$KSHARD_CACHE"/bin/* | "$CLUSTER_BIN"/* | "$REPO_ROOT"/build/bin/*) echo "process ${p#/proc/} $exe" ;;
    esac
  done
  return 0
}

was_up=no
proc_alive kube-apiserver && was_up=yes
if [ "$was_up" = no ]; then
  before="$(leftovers)"
  [ -z "$before" ] || die "the machine has leftovers of a cluster before the test; run make cluster-down: $before"
  mounts_before="$(awk '{print $5}' /proc/self/mountinfo | sort)"
fi

up_start=$(date +%s)
bash "$CLUSTER_SRC/up.sh"
up_secs=$(($(date +%s) - up_start))
pids_first="$(cat "$CLUSTER_DIR"/pids/*.pid | sort)"
bash "$CLUSTER_SRC/up.sh" 2>/dev/null
[ "$pids_first" = "$(cat "$CLUSTER_DIR"/pids/*.pid | sort)" ] || die "a second cluster-up restarted running components"
log "cluster-up took ${up_secs} s; a second cluster-up left the running cluster alone"

setup_go
go_log="$CLUSTER_DIR/logs/go-test.log"
log "running the cluster's acceptance tests (output also in ${go_log#"$REPO_ROOT/"})"
set +e
(
  cd "$CLUSTER_SRC"
  KUBECONFIG="$CLUSTER_DIR/kubeconfig" KSHARD_EXPECT_K8S_VERSION="$KUBERNETES_VERSION" \
    KSHARD_CLUSTER_LOGS="$CLUSTER_DIR/logs" KSHARD_CLUSTER_SCRIPTS="$CLUSTER_SRC" \
    KSHARD_CLUSTER_NETNS_PREFIX="$NETNS_PREFIX" KSHARD_CLUSTER_BRIDGE="$BRIDGE" KSHARD_CLUSTER_DIR="$CLUSTER_DIR" \
    go test -p 1 -count=1 -v -timeout 20m ./fault/ ./nodestate/ ./test/
) 2>&1 | tee "$go_log"
test_rc=${PIPESTATUS[0]}
set -e
passed=$(grep -c -- '^--- PASS' "$go_log" || true)
failed=$(grep -c -- '^--- FAIL' "$go_log" || true)

# cluster-down must clean up after a crashed node too: two pods running, one with a Secret volume,
# one of them an orphan (its kubelet stopped, its object force-deleted), then SIGKILL the kubelet
# and containerd, leaving the shims and containers behind.
crash_node() {
  local k kc="$CLUSTER_DIR/kubeconfig"
  k="$(kubectl_bin)"
  "$k" --kubeconfig="$kc" apply -f - >/dev/null <<'YAML' || return 1
apiVersion: v1
kind: Namespace
metadata: {name: e2e-node-crash}
---
apiVersion: v1
kind: Secret
metadata: {name: s, namespace: e2e-node-crash}
stringData: {k: v}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: crash, namespace: e2e-node-crash}
spec:
  replicas: 2
  selector: {matchLabels: {app: crash}}
  template:
    metadata: {labels: {app: crash}}
    spec:
      containers:
      - name: app
        image: kshard/e2e-app:1.0.0
        readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 1}
        volumeMounts: [{name: s, mountPath: /etc/kshard-e2e-crash/secret}]
      volumes: [{name: s, secret: {secretName: s}}]
YAML
  "$k" --kubeconfig="$kc" -n e2e-node-crash rollout status deployment/crash --timeout=90s >/dev/null || return 1
  local orphan
  orphan="$("$k" --kubeconfig="$kc" -n e2e-node-crash get pods -o jsonpath='{.items[0].metadata.name}')"
  bash "$CLUSTER_SRC/fault.sh" orphan e2e-node-crash "$orphan" || return 1
  "$k" --kubeconfig="$kc" -n e2e-node-crash delete pod "$orphan" --grace-period=0 --force >/dev/null 2>&1 || return 1
  kill -KILL "$(cat "$(pid_file kubelet)")" "$(cat "$(pid_file containerd)")"
  log "SIGKILLed the kubelet and containerd with 2 pods running, one of them an orphan"
}
if crash_node; then passed=$((passed + 1)); else log "could not set up the node-crash check"; failed=$((failed + 1)); fi
if [ "$test_rc" != 0 ]; then
  log "tests failed; last lines of the kubelet's log:"
  tail -n 40 "$CLUSTER_DIR/logs/kubelet.log" >&2 || true
  log "all logs stay in ${CLUSTER_DIR#"$REPO_ROOT/"}/logs until the next cluster-up"
fi

bash "$CLUSTER_SRC/down.sh"
bash "$CLUSTER_SRC/down.sh" --quiet
left="$(leftovers)"
if [ "$was_up" = no ]; then
  mounts_after="$(awk '{print $5}' /proc/self/mountinfo | sort)"
  [ "$mounts_before" = "$mounts_after" ] ||
    left+=$'\n'"mounts changed: $(diff <(echo "$mounts_before") <(echo "$mounts_after") | grep '^[<>]' || true)"
fi
left="$(echo "$left" | sed '/^$/d')"
if [ -n "$left" ]; then
  log "cluster-down left these behind:"
  echo "$left" >&2
  failed=$((failed + 1))
else
  log "cluster-down left nothing behind"
  passed=$((passed + 1))
fi
log "cluster-test took $(($(date +%s) - test_start)) s"
echo "cluster-test: $passed passed, $failed failed"
[ "$test_rc" = 0 ] && [ -z "$left" ]
