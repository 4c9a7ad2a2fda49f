#!/usr/bin/env bash
# Builds the local cluster's programs: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, the kubelet (and kubectl when the machine has none), crictl and helm from the Go
# module proxy at the versions pinned in versions.env, into ${KSHARD_CACHE:-~/.cache/kshard}/bin;
# and this folder's programs (the fault tool, the node's recorder, the test programs) into
# e2e/cluster/bin. Each is rebuilt
# only when its inputs changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
setup_go
log "using $(go version) (GOCACHE=$GOCACHE)"

# stamp_of <files...>: a digest of the inputs that decide a build.
stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# build_if_needed <label> <output dir> <stamp> <command...>: runs the command (which writes into
# "$out.tmp") unless the output dir holds a build with the same stamp.
build_if_needed() {
  local label="$1" out="$2" stamp="$3"
  shift 3
  if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
    return 0
  fi
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  out="$out.tmp" timed "building $label" "$@"
  echo "$stamp" >"$out.tmp/.stamp"
  rm -rf "$out" && mv "$out.tmp" "$out"
}

k8s_ldflags() {
  local minor="${KUBERNETES_VERSION#v1.}"
  minor="${minor%%.*}"
  local flags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    # The module proxy does not say which commit a version is: gitCommit stays empty.
    flags+=" -X $pkg.gitCommit= -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

build_k8s() {
  local cmds=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
  command -v kubectl >/dev/null 2>&1 || cmds+=(k8s.io/kubernetes/cmd/kubectl)
  (cd "$CLUSTER_SRC/tools/k8s" && go build -trimpath -ldflags "$(k8s_ldflags)" -o "$out/" "${cmds[@]}")
}
build_etcd() {
  (cd "$CLUSTER_SRC/tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$out/etcd" .)
}
# helm's own Makefile sets its version and the Kubernetes version it assumes without a cluster.
helm_ldflags() {
  local kminor
  kminor="$(cd "$CLUSTER_SRC/tools/helm" && go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)"
  local flags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" pkg
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kminor"
  done
  echo "$flags"
}
build_helm() {
  (cd "$CLUSTER_SRC/tools/helm" && go build -trimpath -ldflags "$(helm_ldflags)" -o "$out/helm" helm.sh/helm/v3/cmd/helm)
}
build_crictl() {
  (cd "$CLUSTER_SRC/tools/crictl" && go build -trimpath -o "$out/crictl" \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl)
}
build_local() {
  (cd "$CLUSTER_SRC" && go build -trimpath -o "$out/" ./cmd/...)
}

have_kubectl="$(command -v kubectl >/dev/null 2>&1 && echo yes || echo no)"
log "kubectl on this machine: $have_kubectl (built with the control plane when no)"
build_if_needed "etcd $ETCD_VERSION" "$ETCD_BIN" \
  "$(stamp_of "$CLUSTER_SRC"/tools/etcd/go.{mod,sum} "$CLUSTER_SRC/tools/etcd/main.go")" build_etcd
build_if_needed "kube-apiserver, kube-controller-manager, kube-scheduler, kubelet $KUBERNETES_VERSION" \
  "$TOOLS_BIN" "$(stamp_of "$CLUSTER_SRC"/tools/k8s/go.{mod,sum} <(k8s_ldflags) <(echo "$have_kubectl"))" build_k8s
build_if_needed "helm $HELM_VERSION" "$HELM_BIN" "$(stamp_of "$CLUSTER_SRC"/tools/helm/go.{mod,sum} <(helm_ldflags))" build_helm
build_if_needed "crictl $CRICTL_VERSION" "$CRICTL_BIN" "$(stamp_of "$CLUSTER_SRC"/tools/crictl/go.{mod,sum})" build_crictl
# This folder's programs (relinked only when a source changed).
local_stamp="$(stamp_of "$CLUSTER_SRC"/go.{mod,sum} $(find "$CLUSTER_SRC"/{cmd,fault,nodestate} -name '*.go' | sort))"
build_if_needed "the fault tool, the node's recorder and test programs" "$CLUSTER_BIN" "$local_stamp" build_local
