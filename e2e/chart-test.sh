#!/usr/bin/env bash
# The chart's static checks: `helm lint` is clean (no warning or error), every template renders
# with the default values and with cert-manager, and the chart's CRDs are those of crds/.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/cluster/lib.sh"
cd "$REPO_ROOT"

if [[ ! -x "$HELM_BIN/helm" ]]; then
  log "helm $HELM_VERSION is not built yet; building the local cluster's tools (e2e/cluster/build.sh)"
  bash "$HERE/cluster/build.sh" >/dev/null
fi
helm="$HELM_BIN/helm"

for crd in crds/*.yaml; do
  if ! cmp -s "$crd" "charts/kshard/$crd"; then
    die "charts/kshard/$crd differs from $crd: cp $crd charts/kshard/crds/"
  fi
done
out=$("$helm" lint --strict charts/kshard 2>&1) || { echo "$out"; die "helm lint failed"; }
if grep -E '^\[(WARNING|ERROR)\]' <<<"$out"; then die "helm lint is not clean"; fi
"$helm" template kshard charts/kshard --namespace kshard-system >/dev/null ||
  die "the chart does not render with its default values"
"$helm" template kshard charts/kshard --namespace kshard-system --set certManager.enabled=true >/dev/null ||
  die "the chart does not render with certManager.enabled=true"
# Opt-in hardening: NetworkPolicies, and the operator confined to one namespace (Roles there).
out=$("$helm" template kshard charts/kshard --namespace kshard-system --set networkPolicy.enabled=true \
  --set 'networkPolicy.shardMaps={demo/counter}' --set operator.watchNamespace=demo) ||
  die "the chart does not render with networkPolicy.enabled=true and operator.watchNamespace"
[[ $(grep -c '^kind: NetworkPolicy' <<<"$out") == 2 ]] || die "expected the operator's and demo/counter's NetworkPolicies"
grep -q -- '--watch-namespace=demo' <<<"$out" || die "operator.watchNamespace does not reach the operator"
if "$helm" template kshard charts/kshard --set networkPolicy.enabled=true \
  --set 'networkPolicy.shardMaps={counter}' >/dev/null 2>&1; then
  die "networkPolicy.shardMaps accepted an entry that is not namespace/name"
fi
# The Grafana dashboard's ConfigMap: labelled for Grafana's sidecar, carrying the dashboard whole.
# (tests/metrics/dashboard_test.cc checks that its queries name only metrics kshard exports.)
out=$("$helm" template kshard charts/kshard --namespace kshard-system \
  --set metrics.grafanaDashboard.enabled=true --show-only templates/grafana-dashboard.yaml) ||
  die "the chart does not render with metrics.grafanaDashboard.enabled=true"
grep -q 'grafana_dashboard: "1"' <<<"$out" || die "the dashboard's ConfigMap lacks Grafana's sidecar label"
sed -n '/kshard.json: |-/,$p' <<<"$out" | tail -n +2 | sed 's/^    //' |
  cmp -s - charts/kshard/dashboards/kshard.json ||
  die "the dashboard's ConfigMap does not carry charts/kshard/dashboards/kshard.json unchanged"
log "chart: helm lint clean, templates render (default, cert-manager, network policies, one namespace, dashboard), CRD in sync"
