#!/usr/bin/env bash
# The chart's static checks: `helm lint` is clean (no warning or error), every template renders
# with the default values and with cert-manager, and the chart's CRD is crds/shardmap.yaml.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/cluster/lib.sh"
cd "$REPO_ROOT"

if [[ ! -x "$HELM_BIN/helm" ]]; then
  log "helm $HELM_VERSION is not built yet; building the local cluster's tools (e2e/cluster/build.sh)"
  bash "$HERE/cluster/build.sh" >/dev/null
fi
helm="$HELM_BIN/helm"

if ! cmp -s crds/shardmap.yaml charts/kshard/crds/shardmap.yaml; then
  die "charts/kshard/crds/shardmap.yaml differs from crds/shardmap.yaml: cp crds/shardmap.yaml charts/kshard/crds/"
fi
out=$("$helm" lint --strict charts/kshard 2>&1) || { echo "$out"; die "helm lint failed"; }
if grep -E '^\[(WARNING|ERROR)\]' <<<"$out"; then die "helm lint is not clean"; fi
"$helm" template kshard charts/kshard --namespace kshard-system >/dev/null ||
  die "the chart does not render with its default values"
"$helm" template kshard charts/kshard --namespace kshard-system --set certManager.enabled=true >/dev/null ||
  die "the chart does not render with certManager.enabled=true"
log "chart: helm lint clean, templates render, CRD in sync"
