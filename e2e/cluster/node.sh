# The local cluster's real node: containerd 1.6 with runc and the CNI bridge plugin, the kubelet
# and kube-scheduler, running kshard's images (make images), and the recorder of the containers'
# starts and exits (containers.jsonl). Source after lib.sh and procs.sh; up.sh calls node_start,
# down.sh node_clean.

NODE_RUN="${KSHARD_NODE_RUN:-/run/kshard-node}"
CONTAINERD_SOCK="$NODE_RUN/containerd.sock"
CONTAINERD_ROOT="$CLUSTER_DIR/containerd"
KUBELET_ROOT="$CLUSTER_DIR/kubelet"
CNI_DIR="$CLUSTER_DIR/cni"
# The pod sandbox's image (images/test-program.Dockerfile with kshard-pause).
PAUSE_IMAGE="kshard/pause:dev"
CRICTL="$CRICTL_BIN/crictl"

crictl_() { "$CRICTL" --config "$CLUSTER_DIR/crictl.yaml" "$@"; }
ctr_() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }
containerd_answers() { ctr_ version >/dev/null 2>&1; }

node_write_config() {
  mkdir -p "$CONTAINERD_ROOT" "$KUBELET_ROOT" "$CNI_DIR/net.d" "$CNI_DIR/ipam" "$NODE_RUN" "$CLUSTER_DIR/logs/pods"
  cat >"$CLUSTER_DIR/containerd.toml" <<EOF
version = 2
root = "$CONTAINERD_ROOT"
state = "$NODE_RUN/containerd"
# The snapshotters this node does not use would only log errors.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_RUN/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Lowering a process's oom_score_adj is not permitted in every sandbox this runs in.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CNI_DIR/net.d"
    max_conf_num = 1
EOF
  # Pods on the bridge up.sh made (it holds the node's address): no gateway, no masquerade, no
  # route but the pod range's own and the kubernetes Service's address (node_service_rule), the
  # isolation the tests check (e2e/cluster/test).
  cat >"$CNI_DIR/net.d/10-kshard.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kshard",
  "plugins": [{
    "type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "isDefaultGateway": false,
    "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "$CNI_DIR/ipam",
             "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "${BRIDGE_IP%.*}.2"}]],
             "routes": [{"dst": "$KUBERNETES_SERVICE_IP/32", "gw": "$BRIDGE_IP"}]}
  }]
}
EOF
  printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 10\n' \
    "$CONTAINERD_SOCK" "$CONTAINERD_SOCK" >"$CLUSTER_DIR/crictl.yaml"
  # For the fault tool (fault/cri.go) and a user's look at the node: .cluster/crictl ps.
  printf '#!/bin/sh\nexec %s --config %s "$@"\n' "$CRICTL" "$CLUSTER_DIR/crictl.yaml" >"$CLUSTER_DIR/crictl"
  chmod +x "$CLUSTER_DIR/crictl"
  local pki="$CLUSTER_DIR/pki"
  cat >"$CLUSTER_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $BRIDGE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
# This machine's cgroups are hybrid (v1 controllers) and it has swap.
failCgroupV1: false
failSwapOn: false
podLogsDir: $CLUSTER_DIR/logs/pods
# Large enough that no test's container log is rotated under the recorder that copies it.
containerLogMaxSize: 200Mi
# Images come from make images, not from a registry: never collect them, and never evict a pod
# for the machine's disk or memory, which the tests do not model.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {}
enforceNodeAllocatable: []
maxPods: 250
# Secret and ConfigMap volumes follow their sources on this period (a minute by default).
syncFrequency: 30s
serializeImagePulls: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
nodeStatusUpdateFrequency: 10s
EOF
}

# Imports every archive of build/images into containerd (make images wrote them).
node_import_images() {
  local archive
  for archive in "$REPO_ROOT"/build/images/*.tar; do
    [ -f "$archive" ] || die "no image archives in build/images: run make images"
    ctr_ images import "$archive" >/dev/null || die "could not import $archive into containerd"
  done
}

# node_service_rule add|del: the kubernetes Service (ClusterIP 10.96.0.1, port 443: what the
# kubelet gives pods as KUBERNETES_SERVICE_HOST and _PORT) leads to the API server on the node's
# address, through one DNAT rule for packets that come from the pod bridge, in place of
# kube-proxy. The rewritten packets are for the node itself: nothing is forwarded.
KUBERNETES_SERVICE_IP="${SERVICE_CIDR%.*}.1"
NODE_SERVICES_CHAIN=KSHARD-NODE-SERVICES
node_service_rule() {
  if [ "$1" = add ]; then
    iptables -t nat -N "$NODE_SERVICES_CHAIN" 2>/dev/null || iptables -t nat -F "$NODE_SERVICES_CHAIN"
    iptables -t nat -A "$NODE_SERVICES_CHAIN" -d "$KUBERNETES_SERVICE_IP/32" -p tcp --dport 443 \
      -j DNAT --to-destination "$BRIDGE_IP:$APISERVER_PORT"
    iptables -t nat -C PREROUTING -i "$BRIDGE" -j "$NODE_SERVICES_CHAIN" 2>/dev/null ||
      iptables -t nat -I PREROUTING -i "$BRIDGE" -j "$NODE_SERVICES_CHAIN"
  else
    while iptables -t nat -D PREROUTING -i "$BRIDGE" -j "$NODE_SERVICES_CHAIN" 2>/dev/null; do :; done
    iptables -t nat -F "$NODE_SERVICES_CHAIN" 2>/dev/null && iptables -t nat -X "$NODE_SERVICES_CHAIN"
  fi
  return 0
}

node_start() {
  for tool in containerd runc ctr; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install containerd runc)"
  done
  [ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing (apt-get install containernetworking-plugins)"
  [ -f "$CLUSTER_DIR/containerd.toml" ] || node_write_config
  node_service_rule add
  if ! proc_alive containerd; then
    proc_start containerd "$(command -v containerd)" --config "$CLUSTER_DIR/containerd.toml"
    wait_until 30 "containerd answering on $CONTAINERD_SOCK" containerd_answers
    timed "images into containerd" node_import_images
  fi
  # containers.jsonl, and the containers' output kept past their pods (cmd/kshard-node-recorder).
  if ! proc_alive kshard-node-recorder; then
    proc_start kshard-node-recorder "$CLUSTER_BIN/kshard-node-recorder" --address "$CONTAINERD_SOCK" \
      --log-dir "$CLUSTER_DIR/logs" --pods-dir "$CLUSTER_DIR/logs/pods"
  fi
  if ! proc_alive kube-scheduler; then
    local kc="$CLUSTER_DIR/scheduler.kubeconfig"
    proc_start kube-scheduler "$TOOLS_BIN/kube-scheduler" --kubeconfig="$kc" \
      --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
      --leader-elect=false --bind-address=127.0.0.1 --secure-port=10259 --v=1
  fi
  if ! proc_alive kubelet; then
    proc_start kubelet "$TOOLS_BIN/kubelet" --config="$CLUSTER_DIR/kubelet.yaml" \
      --kubeconfig="$CLUSTER_DIR/node.kubeconfig" --hostname-override="$NODE_NAME" \
      --node-ip="$BRIDGE_IP" --root-dir="$KUBELET_ROOT" --cert-dir="$KUBELET_ROOT/pki" --v=1
  fi
}

# Stops the node and removes what it made: pods (their sandboxes and network namespaces),
# containerd and its shims, the containers' cgroups and the mounts under the node's folders.
node_clean() {
  proc_stop kshard-node-recorder 5
  # A kubelet the fault tool holds stopped for an orphan (fault/orphan.go) takes SIGTERM only
  # once resumed.
  proc_alive kubelet && kill -CONT "$(cat "$(pid_file kubelet)")" 2>/dev/null
  proc_stop kubelet 15
  proc_stop kube-scheduler 10
  if proc_alive containerd; then
    crictl_ rmp --all --force >/dev/null 2>&1 || true
  fi
  proc_stop containerd 10
  # Shims outlive containerd by design; their containers die with them.
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  node_kill_cgroups
  # Mounts in the node's folders (container root file systems, volumes, the sandboxes' shm and
  # network namespaces) and on them (the kubelet bind-mounts its root onto itself), deepest first.
  local dir m
  for dir in "$NODE_RUN" "$KUBELET_ROOT" "$CONTAINERD_ROOT"; do
    awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
      while read -r m; do
        umount -l "$m" 2>/dev/null || true
      done
  done
  # Sandboxes' network namespaces that containerd did not remove (it was killed): only those its
  # metadata names, since another containerd on the machine may have cni-* namespaces too.
  for m in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-'); do
    grep -rqs "$m" "$CONTAINERD_ROOT" 2>/dev/null && ip netns del "$m" 2>/dev/null
  done
  rm -rf "$NODE_RUN"
  command -v iptables >/dev/null && node_service_rule del
}

# The kubelet's cgroups (cgroupfs driver) that exist: kubepods under every v1 controller and in
# the v2 tree, whether that is mounted beside them (hybrid) or alone.
node_kubepods() {
  local root
  for root in /sys/fs/cgroup/*/ "$(cgroup2_root)/"; do
    [ -d "${root%/}/kubepods" ] && echo "${root%/}/kubepods"
  done | sort -u
}

node_kill_cgroups() {
  local top dir i
  for top in $(node_kubepods); do
    find "$top" -name cgroup.procs 2>/dev/null | xargs cat 2>/dev/null | sort -u |
      xargs -r kill -KILL 2>/dev/null || true
    find "$top" -depth -type d | while read -r dir; do
      for i in $(seq 50); do
        rmdir "$dir" 2>/dev/null && break
        xargs -r kill -KILL <"$dir/cgroup.procs" 2>/dev/null || true
        sleep 0.1
      done
    done
  done
}
