#!/usr/bin/env bash
# Generates the cluster's certificates and keys with openssl into .cluster/pki (kept if present):
# one CA for everything, the API server's serving certificate, client certificates for the
# admin, the controller-manager, the kubelet (system:node:<name>), kube-scheduler and the API
# server's kubelet client, the kubelet's serving certificate, a front-proxy CA and client, and
# the service-account signing key pair.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

PKI="$CLUSTER_DIR/pki"
mkdir -p "$PKI"
cd "$PKI"
[ -f .complete ] && exit 0

ca() { # ca <name> <CN>
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.crt" -days 3650 \
    -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

# cert <name> <ca> <subject> <extendedKeyUsage> [subjectAltName]
cert() {
  local name="$1" signer="$2" subj="$3" eku="$4" san="${5:-}"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$signer.crt" -CAkey "$signer.key" -CAcreateserial \
    -out "$name.crt" -days 3650 -extfile "$name.ext" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

ca ca "kshard-local-ca"
ca front-proxy-ca "kshard-local-front-proxy-ca"
api_san="IP:$BRIDGE_IP,IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default"
api_san+=",DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver ca "/CN=kube-apiserver" serverAuth "$api_san"
cert admin ca "/O=system:masters/CN=kshard-admin" clientAuth
cert controller-manager ca "/CN=system:kube-controller-manager" clientAuth
cert node ca "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert scheduler ca "/CN=system:kube-scheduler" clientAuth
cert kubelet ca "/O=system:nodes/CN=system:node:$NODE_NAME" serverAuth "IP:$BRIDGE_IP,DNS:$NODE_NAME"
cert apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert front-proxy-client front-proxy-ca "/CN=front-proxy-client" clientAuth
openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
chmod 600 ./*.key
touch .complete
