#!/usr/bin/env bash
# make cluster-down: stops the local cluster and removes everything it created on the machine:
# processes (the components and every container, orphaned pods' too, found through their cgroups,
# even if the node agent crashed), network namespaces (with the fault tool's rules in them), veths,
# the bridge, the mount points created for volumes, and the cluster's state. Container and
# component logs stay in .cluster/logs until the next cluster-up. Stopping a stopped cluster is
# harmless.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$CLUSTER_SRC/procs.sh"
source "$CLUSTER_SRC/node.sh"

quiet=no
[ "${1:-}" = --quiet ] && quiet=yes
say() { [ "$quiet" = yes ] || log "$@"; }

# Containers are in <cgroup2>/kshard/pod-<uid>/<container>: kill each cgroup's processes, then
# remove the cgroups, deepest first.
kill_cgroups() {
  local root dir
  root="$(cgroup2_root)"
  [ -n "$root" ] && [ -d "$root/kshard" ] || return 0
  # One kill for the whole tree, then wait until no process is left anywhere in it (a killed
  # process leaves its cgroup only once it has exited and been reaped, which can take seconds).
  echo 1 >"$root/kshard/cgroup.kill" 2>/dev/null || true
  local i
  for i in $(seq 300); do
    grep -q '^populated 0' "$root/kshard/cgroup.events" 2>/dev/null && break
    ((i % 50 == 0)) && echo 1 >"$root/kshard/cgroup.kill" 2>/dev/null
    sleep 0.1
  done
  find "$root/kshard" -depth -type d | while read -r dir; do
    echo 1 >"$dir/cgroup.kill" 2>/dev/null || true
    for i in $(seq 100); do
      [ -z "$(cat "$dir/cgroup.procs" 2>/dev/null)" ] && rmdir "$dir" 2>/dev/null && break
      sleep 0.1
    done
    [ -d "$dir" ] && log "warning: could not remove cgroup $dir (processes: $(tr '\n' ' ' <"$dir/cgroup.procs" 2>/dev/null))"
  done
  return 0
}

proc_stop kshard-node-agent 10
kill_cgroups
node_clean
proc_stop kube-controller-manager 10
proc_stop kube-apiserver 15
proc_stop etcd 10

for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NETNS_PREFIX"); do
  ip netns del "$ns" && say "deleted network namespace $ns"
done
# Host ends of veth pairs whose namespace was never completed.
for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^vk[0-9a-f]{12}$'); do
  ip link del "$link" 2>/dev/null && say "deleted veth $link"
done
if ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link del "$BRIDGE" && say "deleted bridge $BRIDGE"
fi
# Mount points the node agent created on the host for volumes (deepest first; only if empty).
if [ -f "$CLUSTER_DIR/agent/created-paths" ]; then
  tac "$CLUSTER_DIR/agent/created-paths" | while read -r p; do
    if [ -d "$p" ] && [ ! -L "$p" ]; then
      rmdir "$p" 2>/dev/null || true
    elif [ -f "$p" ] && [ ! -s "$p" ]; then
      rm -f "$p"
    fi
  done
fi
# "ip netns add" mounts /run/netns on itself; undo that if it was not mounted before and is empty.
if [ "$(cat "$CLUSTER_DIR/state/run-netns-was-mounted" 2>/dev/null)" = no ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
  while mountpoint -q /run/netns; do umount /run/netns || break; done
  rmdir /run/netns 2>/dev/null || true
fi
if [ -d "$CLUSTER_DIR" ]; then
  find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
fi
say "cluster is down (logs kept in ${CLUSTER_DIR#"$REPO_ROOT/"}/logs)"
