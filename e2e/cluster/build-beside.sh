#!/usr/bin/env bash
# e2e/cluster/build-beside.sh <command...>: runs the command while the local cluster's programs
# (Go, e2e/cluster/build.sh) build in the background, and fails when either fails.
#
# `make demo` and `make test` start with kshard's C++ builds; the Go builds of etcd, the Kubernetes
# components, helm and crictl are only needed when the cluster starts. Built beside the C++, their
# module downloads and the cores the compiler, the unit tests and the fuzz runs leave idle are put
# to use. They run at a lower priority (nice 10), so the C++ chain, which everything after it
# waits for, keeps the cores it can use. Their log is printed when they fail; cluster-up then
# finds them built.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
(($# > 0)) || die "usage: e2e/cluster/build-beside.sh <command...>"

cluster_log="$(mktemp)"
log "building the local cluster's programs in the background (log: $cluster_log)"
# Its own process group, so that stopping it stops the go commands under it too.
setsid nice -n 10 bash "$CLUSTER_SRC/build.sh" >"$cluster_log" 2>&1 &
cluster_build=$!
trap 'kill -- "-$cluster_build" 2>/dev/null || true; rm -f "$cluster_log"' EXIT

status=0
"$@" || status=$?
# The command failed: what it was for will not run, so neither waits for the Go builds.
((status == 0)) || exit "$status"

if ! wait "$cluster_build"; then
  cat "$cluster_log" >&2
  die "building the local cluster's programs failed (above)"
fi
trap - EXIT
grep 'done in' "$cluster_log" >&2 || true
rm -f "$cluster_log"
