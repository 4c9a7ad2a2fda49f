#!/usr/bin/env bash
# Installs Schemathesis, pinned by e2e/schemathesis/requirements.txt, into a venv under
# build/schemathesis/venv (again only when the requirements changed) and prints the path of its
# schemathesis executable. Used by e2e/schemathesis/run.sh (the sidecar) and e2e/operator/run.sh
# (the manager API).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=e2e/schemathesis
venv=build/schemathesis/venv
if [[ ! -x $venv/bin/schemathesis ]] || ! cmp -s "$here/requirements.txt" "$venv/requirements.txt"; then
  echo "schemathesis: installing $(grep '^schemathesis==' "$here/requirements.txt") into $venv" >&2
  mkdir -p build/schemathesis
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi
echo "$PWD/$venv/bin/schemathesis"
