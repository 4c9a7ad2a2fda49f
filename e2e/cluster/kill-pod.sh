#!/usr/bin/env bash
# e2e/cluster/kill-pod.sh <namespace> <pod>: SIGKILLs every process of every container of the pod
# at once, without preStop or SIGTERM (a crash). The node agent then sees the containers exit
# with code 137 and applies the pod's restartPolicy, as a kubelet would. Needs no API server.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[ $# = 2 ] || { echo "usage: $0 <namespace> <pod>" >&2; exit 2; }
uid=""
for f in "$CLUSTER_DIR"/agent/pods/*/pod; do
  [ -f "$f" ] && [ "$(cat "$f")" = "$1/$2" ] && uid="$(basename "$(dirname "$f")")"
done
[ -n "$uid" ] || die "pod $1/$2 does not run on this node"
root="$(cgroup2_root)"
killed=0
for cg in "$root/kshard/pod-$uid"/*/; do
  [ -f "$cg/cgroup.kill" ] || continue
  if [ -n "$(cat "$cg/cgroup.procs")" ]; then
    echo 1 >"$cg/cgroup.kill"
    killed=$((killed + 1))
  fi
done
[ "$killed" -gt 0 ] || die "pod $1/$2 has no running container"
log "SIGKILLed the processes of $killed container(s) of pod $1/$2"
