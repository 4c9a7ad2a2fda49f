#!/usr/bin/env bash
# Builds and runs the libFuzzer harnesses (fuzz/CMakeLists.txt).
#
#   fuzz/run.sh smoke [name...]   make fuzz-smoke: each harness FUZZ_SMOKE_SECONDS (default 10)
#                                 from its seed corpus, two at a time; the corpus it grows is thrown
#                                 away. Quiet on success: one line per harness. The random seed is
#                                 fixed (FUZZ_SEED, default 1), so that a run on the same machine
#                                 tries the same inputs: `make test` must not pass or fail by luck.
#                                 Finding new bugs is the long mode's work.
#   fuzz/run.sh long [name...]    make fuzz: each harness FUZZ_SECONDS (default 300), FUZZ_JOBS (2)
#                                 at a time, growing build/fuzz/corpus-run/<name>/ (kept across
#                                 runs, never committed); prints a summary. A fresh random seed per
#                                 harness unless FUZZ_SEED is set; the log names it.
#
# Any crash, leak, timeout, out-of-memory or sanitizer report fails the run; the input lands in
# build/fuzz/artifacts/<name>/ and the message says how to reproduce it and keep it as a
# regression (fuzz/regressions/<name>/, replayed by tests/fuzz on every `make test`).
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/fuzz
bin=$build/bin

# One harness, run by the modes below (through xargs, so two run at once).
run_one() {
  local mode=$1 name=$2 seconds=$3
  local log=$build/logs/$name.log artifacts=$build/artifacts/$name/
  local work
  if [[ $mode == smoke ]]; then
    work=$build/smoke-corpus/$name
    rm -rf "$work"
  else
    work=$build/corpus-run/$name
  fi
  mkdir -p "$work" "$artifacts"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192
              -print_final_stats=1 -artifact_prefix="$artifacts")
  [[ -f fuzz/$name.dict ]] && args+=(-dict="fuzz/$name.dict")
  if [[ $mode == smoke ]]; then
    args+=(-seed="${FUZZ_SEED:-1}")
  elif [[ -n ${FUZZ_SEED:-} ]]; then
    args+=(-seed="$FUZZ_SEED")
  fi
  local dirs=("$work" "fuzz/corpus/$name")
  [[ -d fuzz/regressions/$name ]] && dirs+=("fuzz/regressions/$name")
  local status=0
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin/${name}_fuzz" "${args[@]}" "${dirs[@]}" >"$log" 2>&1 || status=$?
  local runs execs cov corpus
  # A crash on the first input leaves no "cov:" line: grep finding nothing must not end the run
  # (set -e, pipefail) before the failure is reported.
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
  corpus=$(find "$work" -type f | wc -l)
  if ((status == 0)); then
    printf 'fuzz %-5s %-17s ok    %4ss %10s runs %7s/s  cov %5s  new inputs %s\n' \
      "$mode" "$name" "$seconds" "${runs:-?}" "${execs:-?}" "${cov:-?}" "$corpus"
    return 0
  fi
  printf 'fuzz %-5s %-17s FAIL  (exit %s)\n' "$mode" "$name" "$status"
  grep -E 'ERROR: |fuzz property failed|^  detail:|SUMMARY|runtime error|Test unit written' "$log" \
    | head -20 | sed 's/^/    /'
  local artifact
  artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  echo "    full log: $log"
  if [[ -n $artifact ]]; then
    echo "    reproduce: $bin/${name}_fuzz $artifact"
    echo "    once fixed, keep it: cp $artifact fuzz/regressions/$name/"
  fi
  return 1
}

if [[ ${1:-} == one ]]; then
  shift
  run_one "$@"
  exit
fi

mode=${1:-smoke}
shift || true
case $mode in
  smoke) seconds=${FUZZ_SMOKE_SECONDS:-10} jobs=2 ;;
  long) seconds=${FUZZ_SECONDS:-300} jobs=${FUZZ_JOBS:-2} ;;
  *) echo "usage: fuzz/run.sh smoke|long [harness...]" >&2; exit 2 ;;
esac

mkdir -p "$build"
if ! cmake --preset fuzz >"$build/configure.log" 2>&1; then
  cat "$build/configure.log"
  exit 1
fi
echo "fuzz: building the harnesses (cmake --build --preset fuzz --target fuzz_harnesses)"
if ! cmake --build --preset fuzz --target fuzz_harnesses >"$build/build.log" 2>&1; then
  grep -E 'error|FAILED' "$build/build.log" | head -40
  echo "fuzz: build failed; full log: $build/build.log"
  exit 1
fi

if (($#)); then
  names=("$@")
else
  mapfile -t names <"$build/fuzz/harnesses.txt"
fi
mkdir -p "$build/logs"
echo "fuzz: ${#names[@]} harnesses, ${seconds}s each, $jobs at a time"
start=$SECONDS
if printf '%s\n' "${names[@]}" | xargs -P "$jobs" -I{} bash fuzz/run.sh one "$mode" {} "$seconds"; then
  echo "fuzz: all ${#names[@]} harnesses clean in $((SECONDS - start))s"
else
  echo "fuzz: failures above ($((SECONDS - start))s)"
  exit 1
fi
