#!/usr/bin/env bash
# Tests both SDKs and runs the contract suite against counter apps.
#
#   sdk/test.sh                      go test, Python unittest, contract suite on the three counters
#   sdk/test.sh NAME='TEMPLATE'...   the contract suite on these apps instead of the three
#
# A TEMPLATE is an app command with the placeholders {app_port} {public_port} {sidecar_port}
# {state_dir} {event_log} {pod} (sdk/contract/run.py). The C++ counter is
# ${KSHARD_COUNTER_BIN:-build/bin/kshard-counter} (make build); the Go counter is built here into
# a temporary directory. Exits non-zero when any step fails; each step's result is summed up last.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../e2e/cluster/lib.sh
source "$root/e2e/cluster/lib.sh"
goflags="${GOFLAGS:-}"  # the caller's (e.g. -p=1), kept beside setup_go's
setup_go
export GOFLAGS="$GOFLAGS $goflags"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

flags='--app-port {app_port} --public-port {public_port} --sidecar-port {sidecar_port}'
flags+=' --state-dir {state_dir} --event-log {event_log} --pod {pod}'
cxx="${KSHARD_COUNTER_BIN:-$root/build/bin/kshard-counter}"

step "sdk/go: go vet, go test" \
  bash -c "cd '$root/sdk/go' && go vet ./... && go test -count=1 ./..."
step "examples/go-counter: go vet, go build" \
  bash -c "cd '$root/examples/go-counter' && go vet ./... && go build -o '$work/go-counter' ."
step "sdk/python: unittest" \
  bash -c "cd '$root/sdk/python' && python3 -m unittest discover -s tests -t ."

apps=("$@")
if [ ${#apps[@]} -eq 0 ]; then
  apps=("c++=$cxx $flags" "go=$work/go-counter $flags"
        "python=python3 $root/examples/python-counter/main.py $flags")
  if [ ! -x "$cxx" ]; then
    STEP_RESULTS+=("FAIL  contract suite: c++: no $cxx (make build, or set KSHARD_COUNTER_BIN)")
    STEP_FAILED=1
    apps=("${apps[@]:1}")
  fi
fi
for app in "${apps[@]}"; do
  step "contract suite: ${app%%=*}" python3 "$root/sdk/contract/run.py" "${app%%=*}" "${app#*=}"
done

log "== SDKs and contract suite: summary"
printf '  %s\n' "${STEP_RESULTS[@]}" >&2
exit "$STEP_FAILED"
