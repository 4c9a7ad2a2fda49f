#!/usr/bin/env bash
# Starts or stops the local cluster's kube-apiserver alone (etcd, the controller-manager and the
# node keep running): e2e/cluster/apiserver.sh start|stop|restart|status.
# "start" returns once /readyz answers; "stop" once the process has exited.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$CLUSTER_SRC/procs.sh"

PKI="$CLUSTER_DIR/pki"

start_apiserver() {
  if proc_alive kube-apiserver; then
    log "kube-apiserver already running (pid $(cat "$CLUSTER_DIR/pids/kube-apiserver.pid"))"
    return 0
  fi
  local args=(
    --advertise-address="$BRIDGE_IP"
    --bind-address="$BRIDGE_IP"
    --secure-port="$APISERVER_PORT"
    --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT"
    --service-cluster-ip-range="$SERVICE_CIDR"
    --authorization-mode=Node,RBAC
    --enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,DefaultTolerationSeconds,NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,ResourceQuota,PodSecurity
    --enable-aggregator-routing=true
    --allow-privileged=true
    --client-ca-file="$PKI/ca.crt"
    --tls-cert-file="$PKI/apiserver.crt"
    --tls-private-key-file="$PKI/apiserver.key"
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt"
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key"
    --kubelet-certificate-authority="$PKI/ca.crt"
    --kubelet-preferred-address-types=InternalIP,Hostname
    --service-account-issuer=https://kubernetes.default.svc.cluster.local
    --service-account-key-file="$PKI/sa.pub"
    --service-account-signing-key-file="$PKI/sa.key"
    --api-audiences=https://kubernetes.default.svc.cluster.local
    --proxy-client-cert-file="$PKI/front-proxy-client.crt"
    --proxy-client-key-file="$PKI/front-proxy-client.key"
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt"
    --requestheader-allowed-names=front-proxy-client
    --requestheader-extra-headers-prefix=X-Remote-Extra-
    --requestheader-group-headers=X-Remote-Group
    --requestheader-username-headers=X-Remote-User
    --profiling=false
    --v=1
  )
  proc_start kube-apiserver "$TOOLS_BIN/kube-apiserver" "${args[@]}"
  wait_until 120 "kube-apiserver /readyz" api_ready
}

api_ready() {
  proc_alive kube-apiserver || die "kube-apiserver exited; see $CLUSTER_DIR/logs/kube-apiserver.log"
  curl -fsS --max-time 2 --cacert "$CLUSTER_DIR/pki/ca.crt" --cert "$CLUSTER_DIR/pki/admin.crt" \
    --key "$CLUSTER_DIR/pki/admin.key" "https://$BRIDGE_IP:$APISERVER_PORT/readyz" >/dev/null 2>&1
}

# kube-apiserver stops serving within a second of SIGTERM, but its process often lingers on
# background shutdown work for more than 30 s: past 15 s it is SIGKILLed (it keeps no state).
stop_apiserver() { proc_stop kube-apiserver 15; }

case "${1:-}" in
  start) start_apiserver ;;
  stop) stop_apiserver ;;
  restart) stop_apiserver && start_apiserver ;;
  status) if proc_alive kube-apiserver && api_ready; then echo running; else echo stopped; exit 1; fi ;;
  *) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
