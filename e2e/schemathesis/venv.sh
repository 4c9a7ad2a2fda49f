#!/usr/bin/env bash
# Installs Schemathesis, pinned by e2e/schemathesis/requirements.txt, into a venv under
# build/schemathesis/venv (again only when the requirements changed) and prints the path of its
# schemathesis executable. Used by e2e/schemathesis/run.sh (the sidecar) and e2e/operator/run.sh
# (the manager API).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash tools/python-venv.sh e2e/schemathesis/requirements.txt build/schemathesis/venv schemathesis
