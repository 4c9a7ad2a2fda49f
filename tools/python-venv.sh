#!/usr/bin/env bash
# Usage: tools/python-venv.sh REQUIREMENTS VENV EXECUTABLE
# Installs the Python tools pinned by REQUIREMENTS (a pip freeze) into the venv VENV (a folder
# under build/), again only when REQUIREMENTS changed, and prints the absolute path of
# VENV/bin/EXECUTABLE. Idempotent: with the venv up to date it installs nothing and prints only
# the path. Needs python3-venv (.ci/install-deps). Used for Schemathesis and lizard.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=$1
venv=$2
executable=$3
if [[ ! -x $venv/bin/$executable ]] || ! cmp -s "$requirements" "$venv/requirements.txt"; then
  echo "$executable: installing $(grep -i "^$executable==" "$requirements") into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" >&2
  cp "$requirements" "$venv/requirements.txt"
fi
echo "$PWD/$venv/bin/$executable"
