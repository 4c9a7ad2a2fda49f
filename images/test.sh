#!/usr/bin/env bash
# make images-test: each product image of `make images` runs its executable under podman (no
# network): the shared libraries resolve in the runtime image, the entry point is the executable,
# and it runs as the non-root user the chart expects (65532). Each SDK example's image
# (kshard/go-counter, kshard/python-counter) runs as 65532 too, on the host's network with free
# ports: its /healthz answers, and a counter incremented on its entity callback (as a sidecar would
# send it) is saved in its default state directory and counts.
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
# check_sdk_example NAME: starts kshard/NAME and asks it as above; 0 when every answer was right.
check_sdk_example() {
  local name=$1 ref="localhost/kshard/$1:$TAG" container="kshard-images-test-$1-$$"
  local app_port public_port user out
  user="$(podman image inspect --format '{{.Config.User}}' "$ref")"
  if [ "$user" != "65532:65532" ]; then
    log "FAIL kshard/$name: runs as '$user', not 65532:65532"
    return 1
  fi
  read -r app_port public_port < <(python3 "$REPO_ROOT/tests/support/free_ports.py" 2 127.0.0.1)
  podman run -d --rm --name "$container" --network host "$ref" \
    --app-port "$app_port" --public-port "$public_port" --pod images-test >/dev/null
  healthy() { curl -fsS --max-time 2 "http://127.0.0.1:$public_port/healthz" | grep -q '"ok"'; }
  increment() {
    curl -fsS --max-time 5 -X POST -H 'Kshard-Epoch: 1' -H 'Kshard-Shard: 0' \
      --data-binary '{"op":"increment","by":2}' "http://127.0.0.1:$app_port/kshard/entities/counter/c1"
  }
  local ok=0
  if ! wait_for 30 "kshard/$name answering /healthz on 127.0.0.1:$public_port" healthy; then
    ok=1
  elif ! increment >/dev/null || ! out="$(increment)" || ! grep -Eq '"value": *4[,}]' <<<"$out"; then
    log "FAIL kshard/$name: two increments by 2 did not count to 4: ${out:-no answer}"
    ok=1
  else
    log "ok   kshard/$name: /healthz answers; two increments by 2 on the entity callback: $out"
  fi
  if [ "$ok" != 0 ]; then
    log "kshard/$name's output:"
    podman logs "$container" 2>&1 | tail -n 20 >&2 || true
  fi
  podman rm -f "$container" >/dev/null 2>&1 || true
  return "$ok"
}
for name in go-counter python-counter; do
  check_sdk_example "$name" || failed=1
done
exit "$failed"
