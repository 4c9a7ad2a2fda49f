#!/usr/bin/env bash
# `make test`: every test of kshard, in an order that keeps a 2-core machine busy when it starts
# cold.
#
#   1. The release build, the images and their tests, the SDKs' tests and the app contract suite,
#      beside the local cluster's Go builds (e2e/cluster/build-beside.sh).
#   2. The local cluster's own tests, then kshard on the cluster (`make cluster-test e2e-test`), on
#      the release build. Beside them, at idle priority, the two builds only the host's tests use:
#      the sanitizer build (`dev` preset) and the fuzz harnesses (`fuzz` preset).
#   3. The unit and component tests, a short run of every fuzz harness, and the API property tests
#      (`make unit-test fuzz-smoke api-test`), once the cluster is down.
#
# Why this order: the cluster suites spend most of their half hour waiting on real time (pods
# starting, grace periods, the faults of the nemesis); the cores are about 80 % idle then. The
# compilers take those cycles (SCHED_IDLE: only what nothing else wants, so no deadline of the
# cluster suites moves); the host's tests run in step 3 on idle cores, so none of their own
# deadlines depends on what else runs.
#
# Every step runs even when an earlier one failed (but for step 2 without step 1's images), and
# the exit status is 1 when any failed; a summary lists each with its time.
set -uo pipefail
cd "$(dirname "$0")/.."
source e2e/cluster/lib.sh

MAKE=${MAKE:-make}
logs=build/logs
mkdir -p "$logs"
# The builds of step 2's background: the sanitizer build of the tests, then the fuzz harnesses.
host_builds() {
  cmake --preset dev >/dev/null && cmake --build --preset dev -j 2 &&
    cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j 2 --target fuzz_harnesses
}

background=""
stop_background() {
  if [[ -n "$background" ]]; then
    kill -- "-$background" 2>/dev/null || true
  fi
}
trap stop_background EXIT

start=$SECONDS
step "release build, images, SDKs (beside the cluster's Go builds)" \
  bash e2e/cluster/build-beside.sh "$MAKE" --no-print-directory build images-test sdk-test
step1=$?

# The bash that setsid and chrt start is a new shell: it gets host_builds from the environment.
export -f host_builds
log "building the sanitizer build and the fuzz harnesses at idle priority (log: $logs/host-builds.log)"
setsid chrt --idle 0 bash -c host_builds >"$logs/host-builds.log" 2>&1 &
background=$!
background_start=$SECONDS

if ((step1 == 0)); then
  step "the local cluster's own tests" "$MAKE" --no-print-directory cluster-test
  step "kshard on the local cluster" "$MAKE" --no-print-directory e2e-test
fi

log "== waiting for the sanitizer build and the fuzz harnesses"
if wait "$background"; then
  STEP_RESULTS+=("ok    sanitizer and fuzz builds, at idle priority ($(duration_text $((SECONDS - background_start))) from their start)")
  background=""
  step "unit and component tests" "$MAKE" --no-print-directory unit-test
  step "fuzz smoke" "$MAKE" --no-print-directory fuzz-smoke
  step "API property tests" "$MAKE" --no-print-directory api-test
else
  background=""
  tail -n 60 "$logs/host-builds.log" >&2
  STEP_RESULTS+=("FAIL  sanitizer and fuzz builds (log: $logs/host-builds.log; above, its end)")
  STEP_FAILED=1
fi

log "== make test: $(duration_text $((SECONDS - start))) in all"
printf '  %s\n' "${STEP_RESULTS[@]}" >&2
exit "$STEP_FAILED"
