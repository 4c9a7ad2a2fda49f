#!/usr/bin/env bash
# Instructions per forwarded message in sidecar A (or B) of the data-path benchmark (docs/benchmarks.md,
# "Sidecar data path"), counted by valgrind's callgrind: a figure that does not move with the
# load of a shared VM, so that a change of a few percent in the sidecar's user time can be seen
# where the throughput of bench/datapath/run.sh varies by more than that from run to run.
#
# The topology is run.sh's (c): fortio → sidecar A → sidecar B (owner) → stub app, on loopback,
# with the stub manager giving every shard to B. Only one sidecar runs under callgrind (A, the
# forwarder, or with PROFILE=b the owner B); the other and the app run normally. After WARMUP
# messages the counters are zeroed, MESSAGES messages are sent (1 KiB bodies, CONNECTIONS
# connections, as fast as the pair answers, all to one entity), and the counts are dumped. With
# ENTITIES above 1 the messages spread over that many entities instead, as in run.sh: wrk
# (bench/datapath/post.lua) sends them for WRK_SECONDS after as long a warm-up, and the count is
# wrk's. One entity keeps the owner's messages waiting in the entity's mailbox (one turn at a
# time); spread, most go straight to the app.
# Printed: the instructions per message, and the functions that cost most by their own
# instructions, with the calls to malloc per message (callgrind_top.py, OUT/top.txt).
#
#   bench/datapath/instructions.sh                    # build what is missing, count
#   SIDECAR=/path/to/kshard-sidecar bench/datapath/instructions.sh   # another build of A
#   PROFILE=b bench/datapath/instructions.sh          # count the owner B instead
#   ENTITIES=1000 PROFILE=b bench/datapath/instructions.sh   # messages spread over 1000 entities
#
# Settings (environment): PROFILE (a or b: the sidecar counted), MESSAGES (4000), WARMUP (2000),
# CONNECTIONS (16), ENTITIES (1), WRK_SECONDS (10), SIDECAR (the counted sidecar's executable; the other is always build/bin's),
# SIDECAR_GLIBC_TUNABLES (as run.sh), OUT (build/bench/datapath-instructions). Needs valgrind
# (apt-get install valgrind).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/bench/datapath
out=${OUT:-$root/build/bench/datapath-instructions}
messages=${MESSAGES:-4000}
warmup=${WARMUP:-2000}
connections=${CONNECTIONS:-16}
entities=${ENTITIES:-1}
wrk_seconds=${WRK_SECONDS:-10}

# shellcheck source=bench/datapath/common.sh
source "$here/common.sh"

for tool in valgrind callgrind_control curl python3; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install valgrind curl python3)"
done
[[ $entities =~ ^[1-9][0-9]*$ ]] || die "ENTITIES must be a positive number, not '$entities'"
((entities == 1)) || command -v wrk >/dev/null || die "wrk is not installed (apt-get install wrk)"
fortio=$(install_fortio)

log "building kshard-sidecar and datapath_stub_app (release preset)"
(cd "$root" && cmake --preset release >/dev/null &&
  cmake --build --preset release --target kshard-sidecar datapath_stub_app >&2)
built=$root/build/bin/kshard-sidecar
sidecar=${SIDECAR:-$built}
profile=${PROFILE:-a}
[[ $profile == a || $profile == b ]] || die "PROFILE must be a or b, not '$profile'"
tunables=$(sidecar_tunables)

mkdir -p "$out"
rm -f "$out"/callgrind.out* "$out"/*.log "$out"/top.txt
pids=()
cleanup() {
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    sleep 0.5
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  rm -f "$FREE_PORTS_STATE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

app_port=$(free_port)
"$root/build/bin/datapath_stub_app" --port "$app_port" >"$out/app.log" 2>&1 &
pids+=($!)
manager_port=$(free_port)
python3 "$root/e2e/support/stub_manager.py" "$manager_port" bench datapath 300 --owner bench-b \
  >"$out/manager.log" 2>&1 &
pids+=($!)
wait_until 10 "the stub manager listening" \
  curl -fsS "http://127.0.0.1:$manager_port/v1/shardmaps/bench/datapath/assignments"

declare -A sidecar_pid
# start_sidecar NAME IP API_PORT: sidecar NAME, under callgrind when it is the one counted.
start_sidecar() {
  local name=$1 ip=$2 api=$3 command=("$built")
  [[ $profile == "$name" ]] &&
    command=(valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" "$sidecar")
  GLIBC_TUNABLES=$tunables "${command[@]}" --pod-name="bench-$name" --pod-namespace=bench \
    --pod-uid="uid-$name" --pod-ip="$ip" --shard-map=datapath --version=1.0.0 \
    --app-port="$app_port" --api-port="$api" --peer-port="$(free_port "$ip")" \
    --admin-port="$(free_port)" --admin-bind-address=127.0.0.1 --map-source=manager \
    --manager-address="127.0.0.1:$manager_port" --peer-auth=none >"$out/sidecar-$name.log" 2>&1 &
  pids+=($!)
  sidecar_pid[$name]=$!
}
start_sidecar b 127.0.0.3 "$(free_port)"
a_port=$(free_port)
start_sidecar a 127.0.0.2 "$a_port"
counted_pid=${sidecar_pid[$profile]}
url=http://127.0.0.1:$a_port/v1/entities/bench
post() { curl -m 5 -fsS -o /dev/null -X POST --data-binary x "$url/probe"; }
wait_until 120 "a message through sidecar A to B (sidecar ${profile^^} under callgrind) answered" post

load() {  # load N ID
  "$fortio" load -quiet -n "$1" -c "$connections" -qps 0 -payload-size 1024 \
    -content-type application/octet-stream "$url/$2" >"$out/fortio-$2.log" 2>&1 ||
    die "fortio failed ($out/fortio-$2.log)"
  grep -q "Code 200 : $1 " "$out/fortio-$2.log" || die "not every message answered 200 ($out/fortio-$2.log)"
}
# spread NAME: wrk for WRK_SECONDS over the entities; prints the messages answered.
spread() {
  ENTITY_IDS=$entities wrk -t1 -c"$connections" -d"${wrk_seconds}s" -s "$here/post.lua" \
    "http://127.0.0.1:$a_port" >"$out/wrk-$1.log" 2>&1 || die "wrk failed ($out/wrk-$1.log)"
  ! grep -q "Non-2xx" "$out/wrk-$1.log" || die "not every message answered 2xx ($out/wrk-$1.log)"
  awk '/requests in/ {print $1}' "$out/wrk-$1.log"
}
if ((entities == 1)); then
  log "warming up: $warmup messages"
  load "$warmup" warm
  callgrind_control -z "$counted_pid" >/dev/null 2>&1
  log "counting: $messages messages at $connections connections"
  load "$messages" counted
else
  log "warming up: wrk for ${wrk_seconds}s over $entities entities"
  spread warm >/dev/null
  callgrind_control -z "$counted_pid" >/dev/null 2>&1
  log "counting: wrk for ${wrk_seconds}s at $connections connections over $entities entities"
  messages=$(spread counted)
  [[ $messages =~ ^[1-9][0-9]*$ ]] || die "no message count in $out/wrk-counted.log"
fi
callgrind_control -d "$counted_pid" >/dev/null 2>&1
dump=$out/callgrind.out.1
wait_until 30 "callgrind's dump" test -s "$dump"
total=$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$dump")
[[ -n $total ]] || total=$(sed -n 's/^totals: \([0-9]*\).*/\1/p' "$dump")
[[ -n $total ]] || die "no total in $dump"
python3 "$here/callgrind_top.py" "$dump" "$messages" 40 >"$out/top.txt" ||
  die "could not summarise $dump"
printf 'sidecar %s (%s): %s instructions per forwarded message (%s in %s messages)\n' \
  "${profile^^}" "$sidecar" "$((total / messages))" "$total" "$messages"
tail -n 1 "$out/top.txt"
log "the functions that cost most: $out/top.txt"
