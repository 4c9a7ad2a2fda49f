# The example apps the suites can install and test, chosen by COUNTER_APP (cpp by default).
# Source it after e2e/cluster/lib.sh; e2e/install.sh and e2e/scenarios/run.sh use it.
#
# One row per app: its name, its manifest, and what the manifest fixes: the namespace, the one
# name of its Deployment, ShardMap and ServiceAccount (its pods are labelled
# app.kubernetes.io/name=<name>), its image repository (tagged 1.0.0 and 1.1.0 by images/build.sh
# for the rolling update) and the hostPath of its shared state (state/ and events.log inside,
# written by the image's user, 65532).
COUNTER_APPS=(
  # app manifest                                   namespace name       image             state
  "cpp  examples/counter/k8s/counter.yaml          demo      counter    kshard/counter    /tmp/kshard-counter"
  "go   examples/go-counter/k8s/go-counter.yaml    demo-go   go-counter kshard/go-counter /tmp/kshard-go-counter"
)

# select_counter_app <app>: sets COUNTER_APP, COUNTER_MANIFEST, COUNTER_NAMESPACE, COUNTER_NAME,
# COUNTER_IMAGE, COUNTER_STATE and COUNTER_EVENT_LOG from the app's row; dies naming the apps
# when there is none.
select_counter_app() {
  local row app manifest ns name image state known=()
  for row in "${COUNTER_APPS[@]}"; do
    read -r app manifest ns name image state <<<"$row"
    known+=("$app")
    [[ "$app" == "$1" ]] || continue
    COUNTER_APP=$app
    COUNTER_MANIFEST=$manifest
    COUNTER_NAMESPACE=$ns
    COUNTER_NAME=$name
    COUNTER_IMAGE=$image
    COUNTER_STATE=$state
    COUNTER_EVENT_LOG="$state/events.log"
    return 0
  done
  die "unknown COUNTER_APP '$1' (one of: ${known[*]})"
}

# counter_app_namespaces: the namespace of every app, one a line.
counter_app_namespaces() {
  local row ns
  for row in "${COUNTER_APPS[@]}"; do
    read -r _ _ ns _ <<<"$row"
    echo "$ns"
  done
}
