#!/usr/bin/env bash
# e2e/cluster/fault.sh <verb> <args>: fault injection on the local cluster's node: kill, freeze,
# thaw, partition, heal, orphan, release, pods. `fault.sh` alone prints the verbs; README.md's
# "Fault injection" says what each one models. A thin wrapper of bin/kshard-fault (package fault),
# which build.sh builds. Needs root and no API server.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "fault injection needs root (cgroups, network namespaces)"
exe="$CLUSTER_BIN/kshard-fault"
[ -x "$exe" ] || die "$exe is not built: make cluster-up builds it"
exec "$exe" --cluster-dir "$CLUSTER_DIR" "$@"
