#!/usr/bin/env bash
# make images: kshard's images, built daemonless with buildah from the Dockerfile, and an image
# archive of each for `kind load image-archive`, `ctr images import`, `podman load` or `skopeo copy`.
#
#   images    kshard/operator, kshard/sidecar, kshard/counter, kshard/kshardctl (the Dockerfile's
#             targets) and the test programs kshard/e2e-app, kshard/operator-stub-pod,
#             kshard/attacker, and kshard/pause, the pod sandbox of the local cluster's node
#             (images/test-program.Dockerfile), and the SDK examples kshard/go-counter and
#             kshard/python-counter (images/sdk-examples.Dockerfile), tagged KSHARD_IMAGE_TAG (dev)
#   archives  build/images/<name>.tar (KSHARD_IMAGES_DIR), every tag of the image inside
#
# The archives are docker-archive tars of OCI images. In an OCI-layout archive the image's name is
# an annotation that importers take verbatim: containerd would store "kshard/operator:dev" while
# the kubelet asks for the normalized name of the pod's "kshard/operator:dev". The names in a
# docker-archive are normalized on import, by containerd (kind), podman and docker alike.
#
# No registry is needed: the Dockerfile's base images (debian:12, debian:12-slim) are made here
# with mmdebstrap from the machine's own Debian sources when the image store has none.
# On a Debian 12 host the images take the executables of the host's release build (`make build`,
# the same shared libraries); elsewhere, or with KSHARD_IMAGES_FROM=source, the Dockerfile's build
# stage compiles them.
set -euo pipefail
source "$(dirname "$0")/../e2e/cluster/lib.sh"
cd "$REPO_ROOT"

export CONTAINERS_CONF="$REPO_ROOT/images/containers.conf"
OUT="${KSHARD_IMAGES_DIR:-$REPO_ROOT/build/images}"
TAG="${KSHARD_IMAGE_TAG:-dev}"
PRODUCT=(operator sidecar counter kshardctl)
# Test program → its executable (built below with the machine's Go).
declare -A TEST_PROGRAMS=(
  [e2e-app]=e2e/cluster/bin/kshard-e2e-app
  [operator-stub-pod]=e2e/operator/bin/kshard-operator-stub-pod
  [attacker]=e2e/security/bin/kshard-attacker
  [pause]=e2e/cluster/bin/kshard-pause
)
# The SDK examples (images/sdk-examples.Dockerfile's targets; the Go counter built below with the
# test programs).
SDK_EXAMPLES=(go-counter python-counter)
# Tags the examples and the tests name besides KSHARD_IMAGE_TAG (examples/counter/k8s, e2e/).
declare -A EXTRA_TAGS=(
  [counter]="1.0.0 1.1.0"
  [go-counter]="1.0.0 1.1.0"
  [e2e-app]="1.0.0 1.1.0"
  [operator-stub-pod]="1.0.0"
  [attacker]="1"
)

for tool in podman buildah mmdebstrap skopeo runc; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: run 'make deps' (Debian 12: apt-get install podman buildah mmdebstrap skopeo runc)"
done
mkdir -p "$OUT"

# The Dockerfile's base images. One minbase root file system without documentation serves both
# names; a store that already has them (pulled from a registry, say) is left as it is.
make_base_images() {
  if podman image exists debian:12 && podman image exists debian:12-slim; then
    return 0
  fi
  local rootfs="$OUT/debian-12-rootfs.tar"
  mmdebstrap --quiet --variant=minbase \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    bookworm "$rootfs"
  podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' "$rootfs" localhost/debian:12 >/dev/null
  podman tag localhost/debian:12 localhost/debian:12-slim
  rm -f "$rootfs"
}

# Sets BUILD_ARGS: where the product's executables come from.
choose_binaries() {
  local host_debian=""
  [ -r /etc/os-release ] && host_debian="$(. /etc/os-release && echo "${ID:-}-${VERSION_ID:-}")"
  if [ "${KSHARD_IMAGES_FROM:-host}" = host ] && [ "$host_debian" = debian-12 ]; then
    log "executables: the host's release build (Debian 12, as the images)"
    make --no-print-directory build
    # The Dockerfile's host stage copies build/images/bin (whatever KSHARD_IMAGES_DIR says).
    rm -rf build/images/bin && mkdir -p build/images/bin
    local bin
    for bin in kshard-operator kshard-sidecar kshard-counter kshardctl; do
      strip --strip-debug -o "build/images/bin/$bin" "build/bin/$bin"
    done
    BUILD_ARGS=(--build-arg BINARIES=host --ignorefile images/host.dockerignore)
  else
    log "executables: compiled in the Dockerfile's build stage (host: ${host_debian:-unknown})"
    BUILD_ARGS=(--build-arg BINARIES=build)
  fi
}

build_test_programs() {
  setup_go
  (cd e2e/cluster && go build -trimpath -o bin/ ./cmd/kshard-e2e-app ./cmd/kshard-pause)
  (cd e2e/operator && go build -trimpath -o bin/kshard-operator-stub-pod ./cmd/stub-pod)
  (cd e2e/security && go build -trimpath -o bin/kshard-attacker ./cmd/attacker)
  (cd examples/go-counter && go build -trimpath -o "$REPO_ROOT/build/examples/bin/kshard-go-counter" .)
}

# image <name> <buildah bud arguments...>: builds kshard/<name>:TAG, adds its extra tags and
# writes its archive.
image() {
  local name=$1 ref="localhost/kshard/$1:$TAG" tag more=()
  shift
  # buildah 1.28 leaves a working container (with its overlay mounted) for each stage a build
  # copies from; remove the ones this build made, so make images leaves no mount behind.
  local before
  before="$(buildah containers -q | sort)"
  buildah bud --quiet --pull=never --network=host --layers -t "$ref" "$@" . >/dev/null
  comm -13 <(echo "$before") <(buildah containers -q | sort) | xargs -r buildah rm >/dev/null
  for tag in ${EXTRA_TAGS[$name]:-}; do
    podman tag "$ref" "localhost/kshard/$name:$tag"
    more+=(--additional-tag "kshard/$name:$tag")
  done
  # With every layer cached the build gives the same image ID: an archive written from that ID
  # with the same tags (its .id file says which) is kept, which saves most of a rebuild's time.
  local archive="$OUT/$name.tar" written
  written="$(podman image inspect --format '{{.Id}}' "$ref") $TAG ${EXTRA_TAGS[$name]:-}"
  if [[ -f $archive && -f $archive.id && "$(<"$archive.id")" == "$written" ]]; then
    return 0
  fi
  rm -f "$archive" "$archive.id"
  skopeo copy --quiet "${more[@]}" "containers-storage:$ref" "docker-archive:$archive:kshard/$name:$TAG"
  echo "$written" >"$archive.id"
}

timed "base images debian:12, debian:12-slim" make_base_images
choose_binaries
timed "test programs and the Go counter (Go)" build_test_programs
for name in "${PRODUCT[@]}"; do
  timed "image kshard/$name:$TAG" image "$name" "${BUILD_ARGS[@]}" --target "$name"
done
for name in "${!TEST_PROGRAMS[@]}"; do
  base=debian:12-slim
  [ "$name" = pause ] && base=scratch
  timed "image kshard/$name:$TAG" image "$name" -f images/test-program.Dockerfile \
    --ignorefile images/host.dockerignore --build-arg "BASE=$base" --build-arg "PROGRAM=${TEST_PROGRAMS[$name]}"
done
for name in "${SDK_EXAMPLES[@]}"; do
  timed "image kshard/$name:$TAG" image "$name" -f images/sdk-examples.Dockerfile \
    --ignorefile images/host.dockerignore --target "$name"
done
podman images --filter reference='localhost/kshard/*' --format '{{.Repository}}:{{.Tag}}  {{.Size}}' | sort
log "archives in $OUT:"
ls -1sh "$OUT"/*.tar >&2
