#!/usr/bin/env bash
# make cluster-down: stops the local cluster and removes everything it created on the machine:
# processes (the components and every container, orphaned pods' too, found through their cgroups,
# even if the kubelet or containerd crashed), network namespaces (with the fault tool's rules in
# them), the bridge, mounts, the node's service rule, and the cluster's state. Container and
# component logs stay in .cluster/logs until the next cluster-up. Stopping a stopped cluster is
# harmless.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$CLUSTER_SRC/procs.sh"
source "$CLUSTER_SRC/node.sh"

quiet=no
[ "${1:-}" = --quiet ] && quiet=yes
say() { [ "$quiet" = yes ] || log "$@"; }

node_clean
proc_stop kube-controller-manager 10
proc_stop kube-apiserver 15
proc_stop etcd 10

if ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link del "$BRIDGE" && say "deleted bridge $BRIDGE"
fi
# Creating a network namespace mounts /run/netns on itself; undo that if it was not mounted before
# and is empty.
if [ "$(cat "$CLUSTER_DIR/state/run-netns-was-mounted" 2>/dev/null)" = no ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
  while mountpoint -q /run/netns; do umount /run/netns || break; done
  rmdir /run/netns 2>/dev/null || true
fi
if [ -d "$CLUSTER_DIR" ]; then
  find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
fi
say "cluster is down (logs kept in ${CLUSTER_DIR#"$REPO_ROOT/"}/logs)"
