#!/usr/bin/env bash
# How long a sidecar takes to drain many active entities (docs/benchmarks.md, "Drain"): one
# kshard-sidecar owns every shard of a stub manager's map (e2e/support/stub_manager.py) in
# front of the stub app (bench/datapath/stub_app.cc, which answers every stop callback at once).
# fortio starts ENTITIES entities through the sidecar's app API, one message each to a new id;
# once the sidecar's /metrics shows them all active, the sidecar gets SIGTERM and drains: it
# unregisters, then stops every entity through the app's stop callback, and exits 0.
#
# Measured: the time from SIGTERM to the exit, the stop callbacks per second, the most
# connections to the app open at once during the drain (sampled with ss every 0.1 s), and the
# stop callbacks that failed (the sidecar's "entity stop failed" log lines).
#
#   bench/datapath/drain.sh                       # build what is missing (release preset), measure
#   ENTITIES=2000 bench/datapath/drain.sh         # a smoke run
#
# Settings (environment): ENTITIES (50000), ROUNDS (3), SHARDS (300), SIDECAR and STUB_APP
# (executables to use instead of building them), FORTIO (a fortio to use instead of installing
# it), SIDECAR_FLAGS (more flags for the sidecar), OUT (build/bench/drain).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/bench/datapath
out=${OUT:-$root/build/bench/drain}
entities=${ENTITIES:-50000}
rounds=${ROUNDS:-3}
shards=${SHARDS:-300}
read -r -a sidecar_flags <<<"${SIDECAR_FLAGS:-}"

# shellcheck source=bench/datapath/common.sh
source "$here/common.sh"

for tool in curl python3 ss; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install curl python3 iproute2)"
done

datapath_binaries
fortio=$(install_fortio)
sidecar_tunables=$(sidecar_tunables)

mkdir -p "$out"
rm -f "$out"/*.log "$out"/results.md
pids=()
sidecar_pid=

cleanup() {
  local status=$?
  if [[ -n $sidecar_pid ]]; then kill -KILL "$sidecar_pid" 2>/dev/null || true; fi
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    sleep 0.3
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  rm -f "${FREE_PORTS_STATE:-}"
  if ((status != 0)); then log "failed; the processes' logs are in $out"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_stub_app

# The sidecar's active entities, from its /metrics (0 when it has none).
active_entities() {
  curl -fsS "http://127.0.0.1:$admin_port/metrics" |
    awk '/^kshard_sidecar_active_entities\{/ {n += $2} END {printf "%d\n", n}'
}
# Connections to the app that are open now (any state but LISTEN and TIME-WAIT).
app_connections() {
  ss -Htn state connected "( dport = :$app_port )" | grep -vc TIME-WAIT || true
}
has_entities() { [[ $(active_entities) -ge $1 ]]; }

printf '| round | entities | drain s | stops / s | most app connections open | failed stops | exit |\n' \
  >"$out/results.md"
printf '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n' >>"$out/results.md"

for round in $(seq 1 "$rounds"); do
  manager_port=$(free_port)
  python3 "$root/e2e/support/stub_manager.py" "$manager_port" bench drain "$shards" \
    --owner bench-owner >"$out/manager-$round.log" 2>&1 &
  manager_pid=$!
  pids+=($manager_pid)
  wait_until 10 "the stub manager listening" \
    curl -fsS "http://127.0.0.1:$manager_port/v1/shardmaps/bench/drain/assignments"

  api_port=$(free_port)
  admin_port=$(free_port)
  peer_port=$(free_port 127.0.0.3)
  GLIBC_TUNABLES=$sidecar_tunables \
    "$sidecar" --pod-name=bench-owner --pod-namespace=bench --pod-uid=uid-owner --pod-ip=127.0.0.3 \
    --shard-map=drain --version=1.0.0 --app-port="$app_port" --api-port="$api_port" \
    --peer-port="$peer_port" --admin-port="$admin_port" --admin-bind-address=127.0.0.1 \
    --map-source=manager --manager-address="127.0.0.1:$manager_port" "${sidecar_flags[@]}" \
    >"$out/sidecar-$round.log" 2>&1 &
  sidecar_pid=$!
  wait_until 60 "the sidecar ready" curl -fsS "http://127.0.0.1:$admin_port/readyz"

  log "round $round: starting $entities entities"
  "$fortio" load -quiet -qps 0 -c 32 -n "$entities" -payload-size 64 \
    -content-type application/octet-stream \
    "http://127.0.0.1:$api_port/v1/entities/bench/{uuid}" >"$out/fortio-$round.log" 2>&1 ||
    die "fortio failed (see $out/fortio-$round.log)"
  wait_until 30 "$entities entities active at the sidecar" has_entities "$entities"
  started=$(active_entities)

  log "round $round: SIGTERM with $started entities active"
  t0=$(date +%s.%N)
  kill -TERM "$sidecar_pid"
  most=0
  while kill -0 "$sidecar_pid" 2>/dev/null; do
    n=$(app_connections)
    ((n > most)) && most=$n
    sleep 0.1
    if (($(date +%s) - ${t0%.*} > 300)); then die "the sidecar did not exit within 300 s of SIGTERM"; fi
  done
  status=0
  wait "$sidecar_pid" || status=$?
  t1=$(date +%s.%N)
  sidecar_pid=
  failed=$(grep -c 'entity stop failed' "$out/sidecar-$round.log" || true)
  grep -q '"drained"' "$out/sidecar-$round.log" || log "round $round: the sidecar did not log \"drained\""
  python3 - "$round" "$started" "$t0" "$t1" "$most" "$failed" "$status" >>"$out/results.md" <<'EOF'
import sys
r, n, t0, t1, most, failed, status = sys.argv[1:]
s = float(t1) - float(t0)
print(f"| {r} | {int(n):,} | {s:.2f} | {int(n) / s:,.0f} | {int(most):,} | {failed} | {status} |")
EOF
  kill -TERM "$manager_pid" 2>/dev/null || true
done

cat "$out/results.md"
