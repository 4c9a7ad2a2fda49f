#!/usr/bin/env python3
"""Service-account-like tokens for the data-path benchmark's authenticated sidecar pair.

Makes an RSA key with the openssl command, writes its public key as a JWKS (DIR/jwks.json) and,
for each POD, an RS256 token as the API server would project it into that pod for its peers
(audience kshard.io/peer/NAMESPACE/SHARD_MAP, issuer ISSUER, namespace NAMESPACE, pod name POD
and uid uid-<suffix after the last "-">, valid for a day) into DIR/token-POD, and
DIR/token-operator for the ServiceAccount NAMESPACE/stub-manager (not bound to a pod, audience
kshard.io/sidecar/NAMESPACE/SHARD_MAP, as the operator mints it), which the stub manager sends on
assign. The sidecars read them with --issuer-keys-file, --issuer and --peer-token-file, so the
benchmark needs no API server.

Usage: tokens.py DIR ISSUER NAMESPACE SHARD_MAP POD...
"""
import base64
import json
import subprocess
import sys
import time


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main():
    out, issuer, namespace, shard_map, pods = (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4],
                                               sys.argv[5:])
    key = f"{out}/key.pem"
    subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
    modulus = subprocess.run(["openssl", "rsa", "-in", key, "-noout", "-modulus"], check=True,
                             capture_output=True, text=True).stdout.strip().split("=", 1)[1]
    jwk = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "bench",
           "n": b64url(bytes.fromhex(modulus)), "e": b64url((65537).to_bytes(3, "big"))}
    with open(f"{out}/jwks.json", "w") as f:
        json.dump({"keys": [jwk]}, f)
    now = int(time.time())
    for pod in pods + ["operator"]:
        account = "stub-manager" if pod == "operator" else "bench"
        audience = f"kshard.io/{'sidecar' if pod == 'operator' else 'peer'}/{namespace}/{shard_map}"
        claims = {"iss": issuer, "aud": [audience],
                  "sub": f"system:serviceaccount:{namespace}:{account}",
                  "iat": now, "nbf": now, "exp": now + 86400,
                  "kubernetes.io": {"namespace": namespace,
                                    "serviceaccount": {"name": account, "uid": account}}}
        if pod != "operator":
            claims["kubernetes.io"]["pod"] = {"name": pod, "uid": "uid-" + pod.rsplit("-", 1)[-1]}
        header = {"alg": "RS256", "kid": "bench", "typ": "JWT"}
        signed = (b64url(json.dumps(header).encode()) + "." +
                  b64url(json.dumps(claims).encode()))
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signed.encode(),
                             check=True, capture_output=True).stdout
        with open(f"{out}/token-{pod}", "w") as f:
            f.write(signed + "." + b64url(sig))


if __name__ == "__main__":
    main()
