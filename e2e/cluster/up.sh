#!/usr/bin/env bash
# make cluster-up: builds what is missing, then starts the local cluster: certificates, the pod
# bridge, etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the node: the kubelet
# with containerd and runc, running kshard's images (node.sh). Starting a running cluster again is
# harmless (running components are left alone).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$CLUSTER_SRC/procs.sh"
source "$CLUSTER_SRC/node.sh"

[ "$(id -u)" = 0 ] || die "the local cluster needs root (network namespaces, bind mounts, cgroups)"
for tool in ip openssl curl setsid; do
  command -v "$tool" >/dev/null || die "$tool is missing (apt-get install iproute2 openssl curl util-linux)"
done
up_start=$(date +%s)
# KSHARD_SKIP_BUILD=1 starts with what is built (for debugging the scripts themselves).
if [ "${KSHARD_SKIP_BUILD:-}" != 1 ]; then
  bash "$CLUSTER_SRC/build.sh"
  timed "kshard's images" bash "$REPO_ROOT/images/build.sh"
fi
KUBECTL="$(kubectl_bin)"
PKI="$CLUSTER_DIR/pki"
KUBECONFIG_FILE="$CLUSTER_DIR/kubeconfig"

any_running=no
for c in etcd kube-apiserver kube-controller-manager containerd kubelet kube-scheduler kshard-node-recorder; do
  proc_alive "$c" && any_running=yes
done
if [ "$any_running" = no ]; then
  # A fresh start: clear what a previous cluster left (down.sh keeps logs for debugging).
  bash "$CLUSTER_SRC/down.sh" --quiet
  rm -rf "$CLUSTER_DIR"
fi
mkdir -p "$CLUSTER_DIR"/{logs,pids,state}

timed "certificates" bash "$CLUSTER_SRC/pki.sh"

# The pod network: a bridge with the node's address. It forwards nothing (no route out of the
# pod range exists for pods, and IPv4 forwarding is off on the bridge whatever the global setting),
# and there is no NAT.
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  if [ ! -f "$CLUSTER_DIR/state/run-netns-was-mounted" ]; then
    if mountpoint -q /run/netns 2>/dev/null; then echo yes; else echo no; fi >"$CLUSTER_DIR/state/run-netns-was-mounted"
  fi
  ip link add "$BRIDGE" type bridge
  echo "$BRIDGE" >"$CLUSTER_DIR/state/bridge"
  ip addr add "$BRIDGE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  log "created bridge $BRIDGE ($BRIDGE_IP/${POD_CIDR#*/})"
fi
sysctl -qw "net.ipv4.conf.$BRIDGE.forwarding=0"
sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1"

if ! proc_alive etcd; then
  proc_start etcd "$ETCD_BIN/etcd" --name=kshard --data-dir="$CLUSTER_DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="kshard=http://127.0.0.1:$ETCD_PEER_PORT" \
    --log-level=warn --quota-backend-bytes=2147483648
  etcd_ready() { curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_CLIENT_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }
  wait_until 60 "etcd health" etcd_ready
fi

timed "kube-apiserver ready" bash "$CLUSTER_SRC/apiserver.sh" start

# kubeconfig <file> <user> <cert name>
kubeconfig() {
  local file="$1" user="$2" certname="$3"
  "$KUBECTL" config --kubeconfig="$file" set-cluster kshard --server="https://$BRIDGE_IP:$APISERVER_PORT" \
    --certificate-authority="$PKI/ca.crt" --embed-certs=true >/dev/null
  "$KUBECTL" config --kubeconfig="$file" set-credentials "$user" --client-certificate="$PKI/$certname.crt" \
    --client-key="$PKI/$certname.key" --embed-certs=true >/dev/null
  "$KUBECTL" config --kubeconfig="$file" set-context kshard --cluster=kshard --user="$user" >/dev/null
  "$KUBECTL" config --kubeconfig="$file" use-context kshard >/dev/null
}
[ -f "$KUBECONFIG_FILE" ] || kubeconfig "$KUBECONFIG_FILE" kshard-admin admin
[ -f "$CLUSTER_DIR/controller-manager.kubeconfig" ] ||
  kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
[ -f "$CLUSTER_DIR/node.kubeconfig" ] || kubeconfig "$CLUSTER_DIR/node.kubeconfig" "system:node:$NODE_NAME" node
[ -f "$CLUSTER_DIR/scheduler.kubeconfig" ] || kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" system:kube-scheduler scheduler

# --node-monitor-grace-period: the fault tool's orphans stop the real node's kubelet for up to a
# minute (fault/cri_orphan.go); the one node stands for one of many, so it must not turn NotReady.
if ! proc_alive kube-controller-manager; then
  cm_kubeconfig="$CLUSTER_DIR/controller-manager.kubeconfig"
  proc_start kube-controller-manager "$TOOLS_BIN/kube-controller-manager" \
    --kubeconfig="$cm_kubeconfig" --authentication-kubeconfig="$cm_kubeconfig" \
    --authorization-kubeconfig="$cm_kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 \
    --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --controllers='*' --node-monitor-grace-period=2m --v=1
fi

node_start

node_ready() {
  local c
  for c in containerd kshard-node-recorder kubelet kube-scheduler; do
    proc_alive "$c" || die "$c exited; see .cluster/logs/$c.log"
  done
  [ "$("$KUBECTL" --kubeconfig="$KUBECONFIG_FILE" get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
wait_until 60 "node $NODE_NAME Ready" node_ready
# Pods get service-account tokens only once the controller-manager has created the namespace's
# default ServiceAccount and kube-root-ca.crt.
sa_ready() { "$KUBECTL" --kubeconfig="$KUBECONFIG_FILE" -n default get serviceaccount default >/dev/null 2>&1 &&
  "$KUBECTL" --kubeconfig="$KUBECONFIG_FILE" -n default get configmap kube-root-ca.crt >/dev/null 2>&1; }
wait_until 60 "the default ServiceAccount and kube-root-ca.crt" sa_ready

# For scripts and shells: source .cluster/env.sh (KUBECONFIG, and helm and kubectl on PATH).
cat >"$CLUSTER_DIR/env.sh" <<ENV
export KUBECONFIG="$KUBECONFIG_FILE"
export PATH="$HELM_BIN:$(dirname "$KUBECTL"):\$PATH"
ENV
log "cluster up in $(($(date +%s) - up_start)) s: Kubernetes $KUBERNETES_VERSION, node $NODE_NAME, pods on $POD_CIDR"
cat >&2 <<USAGE

  export KUBECONFIG=$KUBECONFIG_FILE      # or: source .cluster/env.sh (also puts helm on PATH)
  kubectl get nodes
  helm: $HELM_BIN/helm
  container logs: $CLUSTER_DIR/logs/<namespace>/<pod>/<container>.log (or kubectl logs)
  the node: $CLUSTER_DIR/crictl ps
  stop: make cluster-down

USAGE
