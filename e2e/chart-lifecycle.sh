#!/usr/bin/env bash
# The chart's life on the local cluster, after e2e/install.sh (kshard in kshard-system, the
# counter in demo):
#   1. a pod without the annotation is left untouched by the webhook;
#   2. `helm test` passes;
#   3. the operator's and the sidecar's ServiceAccounts can do what they need and no more
#      (`kubectl auth can-i`: no Secrets, no writes to pods, nothing cluster-wide not needed),
#      and the sidecars' peer API takes assign and unassign only with the operator's token;
#   4. `helm upgrade` keeps the webhook's CA, and the webhook still injects afterwards;
#   5. `helm uninstall` removes every object of the release and keeps the CRD and the ShardMaps.
# It ends with kshard uninstalled. Every wait has a deadline and says what did not happen.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/cluster/lib.sh"
cd "$REPO_ROOT"
export KUBECONFIG="$CLUSTER_DIR/kubeconfig"
helm="$HELM_BIN/helm"
NS=kshard-system
APP_NS=demo

fail() { log "FAIL: $*"; exit 1; }
pass() { log "ok: $*"; }

kubectl get deployment -n "$NS" kshard-operator >/dev/null 2>&1 ||
  fail "kshard is not installed in $NS (run e2e/install.sh first)"

# 1. A pod without the annotation: no sidecar, no label, no annotation from kshard.
kubectl -n "$APP_NS" delete pod plain --ignore-not-found --wait=true >/dev/null
kubectl -n "$APP_NS" run plain --image=kshard/e2e-app:1.0.0 --restart=Never \
  --labels=app.kubernetes.io/name=counter >/dev/null
containers=$(kubectl -n "$APP_NS" get pod plain -o jsonpath='{.spec.containers[*].name} {.spec.initContainers[*].name}')
[[ "$containers" == "plain " ]] || fail "a pod without kshard.io/inject got containers: '$containers'"
[[ -z "$(kubectl -n "$APP_NS" get pod plain -o jsonpath='{.metadata.labels.kshard\.io/shard-map}')" ]] ||
  fail "a pod without kshard.io/inject got the kshard.io/shard-map label"
kubectl -n "$APP_NS" delete pod plain --wait=false >/dev/null
pass "a pod without the annotation is untouched"

# 2. helm test.
out=$("$helm" test kshard -n "$NS" --timeout 120s 2>&1) || { echo "$out"; fail "helm test failed"; }
grep -q "Phase:          Succeeded" <<<"$out" || { echo "$out"; fail "helm test did not succeed"; }
pass "helm test passes"

# 3. Least privilege, as the API server decides it (kubectl auth can-i): what the operator's and
#    the counter's sidecar's ServiceAccounts may and may not do.
operator_sa=$(kubectl -n "$NS" get deployment kshard-operator -o jsonpath='{.spec.template.spec.serviceAccountName}')
sidecar_sa=$(kubectl -n "$APP_NS" get deployment counter -o jsonpath='{.spec.template.spec.serviceAccountName}')
[[ -n "$operator_sa" && -n "$sidecar_sa" ]] || fail "cannot read the operator's or the counter's ServiceAccount"
# can <yes|no> <user> <kubectl auth can-i arguments...>
checks=0
can() {
  local want=$1 who=$2 got
  shift 2
  checks=$((checks + 1))
  got=$(kubectl auth can-i "$@" --as="$who" 2>/dev/null || true)
  [[ "$got" == "$want" ]] || fail "$who: 'can-i $*' is '$got', expected '$want'"
}
op="system:serviceaccount:$NS:$operator_sa"
sc="system:serviceaccount:$APP_NS:$sidecar_sa"
can yes "$op" watch pods --all-namespaces
can yes "$op" watch shardmaps.kshard.io --all-namespaces
can yes "$op" update shardmaps.kshard.io --subresource=status -n "$APP_NS"
can yes "$op" create tokenreviews.authentication.k8s.io
can yes "$op" create events.events.k8s.io -n "$APP_NS"
can yes "$op" create rolebindings.rbac.authorization.k8s.io -n "$APP_NS"
can yes "$op" update leases.coordination.k8s.io/kshard-operator -n "$NS"
can no "$op" get secrets -n "$NS"
can no "$op" list secrets --all-namespaces
can no "$op" create pods -n "$APP_NS"
can no "$op" delete pods -n "$APP_NS"
can no "$op" update pods -n "$APP_NS"
can no "$op" list nodes
can no "$op" update leases.coordination.k8s.io/kube-controller-manager -n kube-system
can no "$op" create clusterrolebindings.rbac.authorization.k8s.io
can no "$op" delete shardmaps.kshard.io -n "$APP_NS"
can yes "$op" create shardmapsegments.kshard.io -n "$APP_NS"
can yes "$op" delete shardmapsegments.kshard.io -n "$APP_NS"
can no "$op" update shardmapsegments.kshard.io -n "$APP_NS"
can yes "$sc" watch shardmaps.kshard.io -n "$APP_NS"
can no "$sc" update shardmaps.kshard.io -n "$APP_NS"
can no "$sc" update shardmaps.kshard.io --subresource=status -n "$APP_NS"
can no "$sc" watch shardmaps.kshard.io -n "$NS"
can yes "$sc" get shardmapsegments.kshard.io -n "$APP_NS"
can no "$sc" create shardmapsegments.kshard.io -n "$APP_NS"
can no "$sc" update shardmapsegments.kshard.io -n "$APP_NS"
can yes "$sc" list shardentities.kshard.io -n "$APP_NS"
can yes "$sc" create shardentities.kshard.io -n "$APP_NS"
can yes "$sc" update shardentities.kshard.io -n "$APP_NS"
can no "$sc" delete shardentities.kshard.io -n "$APP_NS"
can no "$sc" update shardentities.kshard.io -n "$NS"
can no "$op" update shardentities.kshard.io -n "$APP_NS"
can no "$sc" list pods -n "$APP_NS"
can no "$sc" get secrets -n "$APP_NS"
can no "$sc" create tokenreviews.authentication.k8s.io
pass "RBAC: the operator ($op) and the sidecar ($sc) can do what they need and no more (kubectl auth can-i, $checks checks)"

# 3b. The sidecars' peer API (sidecar --peer-auth=token, the chart's default): only the
#     operator's token for this ShardMap (audience kshard.io/sidecar/demo/counter) may ping,
#     assign and unassign; only a registered pod of the ShardMap, with its peer token (audience
#     kshard.io/peer/demo/counter), may forward. Refused calls change nothing. Checked once the map
#     is balanced, so that no round of the operator changes the ownership under the check.
#     (e2e/security/run.sh attacks the same from another namespace and another ShardMap.)
balanced() {
  kubectl -n "$APP_NS" get shardmap counter -o json |
    jq -e '[.status.conditions[]? | select(.type == "Balanced" and .status == "True")] | length == 1' >/dev/null
}
wait_for 180 "the ShardMap demo/counter did not become Balanced" balanced ||
  { shard_map_report "$APP_NS" counter; fail "demo/counter is not balanced (above)"; }
map=$(kubectl -n "$APP_NS" get shardmap counter -o json)
owner=$(jq -r '.status.assignments[0].pod' <<<"$map")
addr=$(jq -r --arg p "$owner" '.status.pods[] | select(.name == $p) | .address' <<<"$map")
# Commands name their target: the pod, its uid and its sidecar's incarnation.
target=$(jq -c --arg p "$owner" '.status.pods[] | select(.name == $p) | {pod: .name, uid, incarnation}' <<<"$map")
target_query=$(jq -r '"pod=\(.pod)&uid=\(.uid)&incarnation=\(.incarnation)"' <<<"$target")
epoch=$(jq -r '.status.epoch' <<<"$map")
[[ -n "$owner" && "$owner" != null && -n "$addr" ]] || fail "the ShardMap demo/counter has no owner: $map"
operator_aud=kshard.io/sidecar/$APP_NS/counter
peer_aud=kshard.io/peer/$APP_NS/counter
op_token=$(kubectl -n "$NS" create token "$operator_sa" --audience "$operator_aud" --duration 10m)
app_token=$(kubectl -n "$APP_NS" create token "$sidecar_sa" --audience "$peer_aud" --duration 10m)
owner_uid=$(kubectl -n "$APP_NS" get pod "$owner" -o jsonpath='{.metadata.uid}')
pod_token() {  # pod_token <audience>: a token bound to the owner pod
  kubectl -n "$APP_NS" create token "$sidecar_sa" --audience "$1" --duration 10m \
    --bound-object-kind Pod --bound-object-name "$owner" --bound-object-uid "$owner_uid"
}
pod_op_token=$(pod_token "$operator_aud")
pod_token=$(pod_token "$peer_aud")
api_token=$(kubectl -n "$NS" create token "$operator_sa" --duration 10m)  # the API server's audience
body=$(mktemp)
# peer <method> <path> <token or ""> [body] → the HTTP status; the answer is in $body.
peer() {
  local args=(-s -o "$body" -w '%{http_code}' -X "$1" "http://$addr$2" -H 'Content-Type: application/json'
              -H 'Kshard-Shard: 1')
  [[ -n "$3" ]] && args+=(-H "Authorization: Bearer $3")
  [[ -n "${4:-}" ]] && args+=(-d "$4")
  curl "${args[@]}" || true
}
expect() {  # expect <status> <what> <peer arguments...>
  local want=$1 what=$2 got
  shift 2
  got=$(peer "$@")
  [[ "$got" == "$want" ]] || fail "$what: HTTP $got, expected $want: $(head -c 300 "$body")"
}
owned() { peer GET "/v1/ping?$target_query" "$op_token" >/dev/null; jq -r '.shards' "$body"; }
before=$(owned)
[[ -n "$before" && "$before" != null ]] || fail "ping with the operator's token: $(head -c 300 "$body")"
unassign=$(jq -c --arg m "$APP_NS/counter" --argjson e $((epoch + 1000)) --arg s "$before" \
  '. + {shardMap: $m, epoch: $e, shards: $s}' <<<"$target")
expect 401 "unassign without a token" POST /v1/shards/unassign "" "$unassign"
expect 401 "unassign with a token for the API server's audience" POST /v1/shards/unassign "$api_token" "$unassign"
expect 401 "unassign with a forged token" POST /v1/shards/unassign "${op_token%??????}AAAAAA" "$unassign"
expect 401 "unassign with the app's peer token" POST /v1/shards/unassign "$app_token" "$unassign"
expect 403 "assign with a pod's token for the sidecars' audience" POST /v1/shards/assign "$pod_op_token" "$unassign"
expect 401 "ping without a token" GET "/v1/ping?$target_query" ""
[[ "$(owned)" == "$before" ]] || fail "refused calls changed what $owner owns: $before → $(owned)"
[[ "$(kubectl -n "$APP_NS" get shardmap counter -o jsonpath='{.status.epoch}')" == "$epoch" ]] ||
  fail "refused calls changed the ShardMap's epoch"
expect 401 "a forwarded message without a token" POST /v1/peer/entities/counter/e2e "" '{}'
expect 403 "a forwarded message with a token not bound to a pod" POST /v1/peer/entities/counter/e2e "$app_token" '{}'
[[ "$(peer POST /v1/peer/entities/counter/e2e "$pod_token" '{}')" != 401 ]] ||
  fail "a registered pod's token was refused on a forwarded message: $(head -c 300 "$body")"
rm -f "$body"
pass "peer API: only the operator's token assigns and unassigns, only registered pods forward; refusals changed nothing"

# 4. helm upgrade keeps the CA, and injection still works.
ca() { kubectl get mutatingwebhookconfiguration kshard-sidecar-injector -o jsonpath='{.webhooks[0].clientConfig.caBundle}'; }
before=$(ca)
[[ -n "$before" ]] || fail "the MutatingWebhookConfiguration kshard-sidecar-injector has no caBundle"
"$helm" upgrade kshard charts/kshard -n "$NS" --reuse-values --wait --timeout 180s >/dev/null ||
  fail "helm upgrade failed"
[[ "$(ca)" == "$before" ]] || fail "helm upgrade changed the webhook's CA"
victim=$(kubectl -n "$APP_NS" get pods -l app.kubernetes.io/name=counter,kshard.io/shard-map \
  -o jsonpath='{.items[0].metadata.name}')
kubectl -n "$APP_NS" delete pod "$victim" --wait=false >/dev/null
injected() {
  # Every counter pod carries the sidecar (the replacement of $victim included) and is ready.
  kubectl -n "$APP_NS" rollout status deployment/counter --timeout=5s >/dev/null || return 1
  local pods
  pods=$(kubectl -n "$APP_NS" get pods -l app.kubernetes.io/name=counter -o json)
  jq -e --arg v "$victim" '[.items[] | select(.metadata.deletionTimestamp == null)] as $p
    | ($p | length) > 0 and ($p | all(.metadata.name != $v))
    and ($p | all((.spec.initContainers // []) + .spec.containers | any(.name == "kshard-sidecar")))' \
    <<<"$pods" >/dev/null
}
wait_for 180 "after helm upgrade, the replacement of $victim did not come up with the sidecar" injected ||
  fail "helm upgrade broke injection"
pass "helm upgrade keeps the CA; the webhook injects afterwards"

# 5. helm uninstall: nothing of the release stays but the CRD (and the ShardMaps, user data).
"$helm" uninstall kshard -n "$NS" --wait --timeout 120s >/dev/null || fail "helm uninstall failed"
selector=app.kubernetes.io/instance=kshard
left() {
  kubectl get deployments,services,serviceaccounts,secrets,configmaps,roles,rolebindings,poddisruptionbudgets \
    -n "$NS" -l "$selector" -o name 2>/dev/null
  kubectl get clusterroles,clusterrolebindings,mutatingwebhookconfigurations -l "$selector" -o name 2>/dev/null
}
nothing_left() { [[ -z "$(left)" ]]; }
wait_for 120 "after helm uninstall, objects of the release remain" nothing_left ||
  fail "after helm uninstall these objects remain: $(left | tr '\n' ' ')"
kubectl get crd shardmaps.kshard.io >/dev/null || fail "helm uninstall removed the CRD"
kubectl -n "$APP_NS" get shardmap counter >/dev/null || fail "helm uninstall removed the ShardMap"
pass "helm uninstall removes the release and keeps the CRD and the ShardMaps"
