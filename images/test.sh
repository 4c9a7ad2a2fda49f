#!/usr/bin/env bash
# make images-test: each product image of `make images` runs its executable under podman (no
# network): the shared libraries resolve in the runtime image, the entry point is the executable,
# and it runs as the non-root user the chart expects (65532).
set -euo pipefail
source "$(dirname "$0")/../e2e/cluster/lib.sh"
export CONTAINERS_CONF="$REPO_ROOT/images/containers.conf"
TAG="${KSHARD_IMAGE_TAG:-dev}"

failed=0
for name in operator sidecar counter kshardctl; do
  ref="localhost/kshard/$name:$TAG"
  user="$(podman image inspect --format '{{.Config.User}}' "$ref")"
  if [ "$user" != "65532:65532" ]; then
    log "FAIL kshard/$name: runs as '$user', not 65532:65532"
    failed=1
  fi
  if out="$(podman run --rm --network none "$ref" --help 2>&1)" && grep -q '^Usage: ' <<<"$out"; then
    log "ok   kshard/$name: $(grep -m1 '^Usage: ' <<<"$out")"
  else
    log "FAIL kshard/$name: --help did not print its usage:"
    printf '%s\n' "$out" | head -n 20 >&2
    failed=1
  fi
done
exit "$failed"
