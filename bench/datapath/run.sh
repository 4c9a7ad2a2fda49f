#!/usr/bin/env bash
# The sidecar data-path benchmark of docs/benchmarks.md ("Sidecar data path", issue 6): three
# topologies side by side in one run, on loopback only, in front of the same stub app
# (bench/datapath/stub_app.cc, kshard's Beast server answering 200 at once):
#
#   (a) direct   load generator → app
#   (b) nginx    load generator → nginx → nginx → app      (keep-alive upstreams)
#   (c) sidecar  load generator → sidecar A → sidecar B (owner) → app
#   and, for reference, load generator → sidecar B (owner) → app: one sidecar, no forwarding;
#   and (c) with peer authentication: sidecar C → sidecar D → app, both with --peer-auth=token,
#   so that every forwarded message carries C's token and D checks it (bench/datapath/tokens.py
#   makes the key and the tokens; the keys come from a file, not from an API server);
#   and (c) over plain HTTP: sidecar E → sidecar F → app, with --peer-transport=http, a request
#   per forwarded message instead of kshard channels (the default), to show what channels change.
#
# For (c), two real kshard-sidecar processes (A: peer API on 127.0.0.2, B: on 127.0.0.3) poll a
# stub manager (e2e/support/stub_manager.py) that gives every shard to B, so every message
# sent to A's app API (POST /v1/entities/bench/{id}) is forwarded to B, which delivers it to the
# app. The sidecars run with their defaults (HTTP backend, I/O threads, log level).
#
# Each round measures, per topology: the throughput with wrk at each of WRK_CONNECTIONS
# connection counts (1 KiB POST bodies, ids spread over ENTITY_IDS entities: post.lua; the best is
# the round's peak), then the latency at a fixed QPS requests/s with fortio (FORTIO_CONNECTIONS
# connections, 1 KiB bodies, a new entity id per request). While wrk runs, the CPU time and
# context switches of the processes in between (and of the app) are read from /proc. The tables
# (report.py) show the median of ROUNDS rounds.
#
#   bench/datapath/run.sh                       # build what is missing (release preset), measure
#   DURATION=3 ROUNDS=1 bench/datapath/run.sh   # a smoke run (figures not meaningful)
#   APP=go-counter bench/datapath/run.sh        # the Go counter example as the app
#
# APP=go-counter puts examples/go-counter (kshard's Go SDK) where the stub app was: every message
# is the counter's {"op":"get"} padded to 1 KiB, to entity type "counter". The Go counter serves
# only the sidecar's callbacks, so (a) and (b) send the callback itself (POST
# /kshard/entities/counter/{id}, no Kshard-* headers: the SDK checks no turn and no incarnation
# then). Each sidecar has its own Go counter: an SDK app follows the sidecar that reset it last
# and refuses the others' callbacks (sdk/README.md, "Reset"), where the stub app serves them all.
# A message to a counter it does not hold loads the counter (a file read, and a file written to
# claim the epoch, in a state directory under /tmp); a "get" on an active counter writes nothing.
#
# Settings (environment): APP (stub, or go-counter), DURATION (s per wrk and per fortio point, 20), ROUNDS (3), WARMUP (s of
# wrk before each topology's points, 3), WRK_THREADS (2), WRK_CONNECTIONS ("16 32 64"), QPS (1000),
# FORTIO_CONNECTIONS (16), FORTIO_RESOLUTION (s, 0.00001), ENTITY_IDS (10000), SHARDS (300),
# NGINX_WORKERS (auto), SIDECAR, STUB_APP and GO_COUNTER (executables to use instead of building
# them), FORTIO
# (a fortio to use instead of installing it), OUT (build/bench/datapath), SIDECAR_GLIBC_TUNABLES
# (the sidecars' GLIBC_TUNABLES; by default the value the sidecar image sets in Dockerfile, so
# that the sidecars run as they do in a pod; empty: glibc's defaults).
#
# Output in OUT: results.md (the tables), raw wrk and fortio output per round and topology, and
# the logs of every process (kept when the run fails).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/bench/datapath
out=${OUT:-$root/build/bench/datapath}
duration=${DURATION:-20}
rounds=${ROUNDS:-3}
warmup=${WARMUP:-3}
wrk_threads=${WRK_THREADS:-2}
wrk_connections=${WRK_CONNECTIONS:-16 32 64}
qps=${QPS:-1000}
fortio_connections=${FORTIO_CONNECTIONS:-16}
entity_ids=${ENTITY_IDS:-10000}
shards=${SHARDS:-300}
nginx_workers=${NGINX_WORKERS:-auto}
# fortio's histogram starts with buckets of this many seconds; its default (1 ms) is coarser than
# the figures measured here, whose percentiles it would interpolate inside one bucket.
fortio_resolution=${FORTIO_RESOLUTION:-0.00001}

# shellcheck source=bench/datapath/common.sh
source "$here/common.sh"

for tool in wrk nginx curl python3; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install wrk nginx-light curl python3)"
done

# --- What runs: the sidecar, the stub app, fortio --------------------------------------------------

datapath_binaries
# The sidecar image's allocator settings (Dockerfile, the sidecar stage).
sidecar_tunables=$(sidecar_tunables)
log "sidecars run with GLIBC_TUNABLES=$sidecar_tunables"

fortio=$(install_fortio)

app=${APP:-stub}
# The path the load generator sends to the app itself (a, b) and to a sidecar's app API (c), and
# the message: wrk's body (post.lua's BODY) and fortio's.
case $app in
  stub)
    app_path=/v1/entities/bench api_path=/v1/entities/bench body=bytes
    fortio_body=(-payload-size 1024 -H "Content-Type: application/octet-stream")
    ;;
  go-counter)
    go_counter=$(go_counter_binary)
    app_path=/kshard/entities/counter api_path=/v1/entities/counter body=counter-get
    # The same 1 KiB as post.lua's: {"op":"get","pad":"x…x"}.
    printf -v pad '%*s' 1003 ''
    fortio_body=(-payload "{\"op\":\"get\",\"pad\":\"${pad// /x}\"}" -H "Content-Type: application/json")
    ;;
  *) die "APP is stub or go-counter, not '$app'" ;;
esac
log "app: $app"

# --- Processes ----------------------------------------------------------------------------------

mkdir -p "$out"
rm -f "$out"/*.log "$out"/*.txt "$out"/fortio-*.json "$out"/results.md
work=$(mktemp -d /tmp/kshard-datapath.XXXXXX)
pids=()
sidecar_pids=()

cleanup() {
  local status=$?
  # The sidecars first, while the app and the manager still answer their drain.
  if ((${#sidecar_pids[@]})); then
    kill -TERM "${sidecar_pids[@]}" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "${sidecar_pids[@]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${sidecar_pids[@]}" 2>/dev/null || true
  fi
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    sleep 0.3
    kill -KILL "${pids[@]}" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
  for dir in "$work"/nginx-*; do
    if [[ -f $dir/error.log ]]; then cp "$dir/error.log" "$out/$(basename "$dir")-error.log"; fi
  done
  rm -rf "$work" "${FREE_PORTS_STATE:-}"
  if ((status != 0)); then log "failed; the processes' logs are in $out"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The app of (a) and (b), and with the stub app the app of every sidecar too.
declare -A app_port_of app_pid_of
# start_go_counter NAME: one Go counter on free ports, its state under $work.
start_go_counter() {
  local name=$1
  app_port_of[$name]=$(free_port)
  "$go_counter" --app-port "${app_port_of[$name]}" --public-port "$(free_port)" \
    --pod "bench-$name" --state-dir "$work/state-$name" >"$out/app-$name.log" 2>&1 &
  pids+=($!)
  app_pid_of[$name]=$!
  wait_until 10 "Go counter $name listening" \
    post_ok "http://127.0.0.1:${app_port_of[$name]}/kshard/entities/counter/probe"
}
if [[ $app == stub ]]; then
  start_stub_app
else
  start_go_counter app
  app_port=${app_port_of[app]} app_pid=${app_pid_of[app]}
fi

# (b) Two nginx, each its own prefix, config and temp directories, as an unprivileged user
# (nobody when this script runs as root). Keep-alive to clients and to the upstream.
nginx_as=()
if ((EUID == 0)); then
  nginx_as=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
  chmod 711 "$work"
fi
start_nginx() {
  local name=$1 listen=$2 upstream=$3
  local dir=$work/$name
  mkdir -p "$dir/tmp"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
worker_processes $nginx_workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  upstream next {
    server $upstream;
    keepalive 256;
    keepalive_requests 1000000;
  }
  server {
    listen $listen;
    location / {
      proxy_pass http://next;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
  if ((EUID == 0)); then chown -R nobody:nogroup "$dir"; fi
  "${nginx_as[@]}" nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" >"$out/$name.log" 2>&1 &
  pids+=($!)
  nginx_pids+=($!)
}
nginx_pids=()
nginx2_port=$(free_port 127.0.0.5)
start_nginx nginx-2 "127.0.0.5:$nginx2_port" "127.0.0.1:$app_port"
nginx1_port=$(free_port 127.0.0.4)
start_nginx nginx-1 "127.0.0.4:$nginx1_port" "127.0.0.5:$nginx2_port"

# (c) The stub manager and the two sidecars; B owns every shard.
manager_port=$(free_port)
python3 "$root/e2e/support/stub_manager.py" "$manager_port" bench datapath "$shards" \
  --owner bench-b >"$out/manager.log" 2>&1 &
pids+=($!)
wait_until 10 "the stub manager listening" \
  curl -fsS "http://127.0.0.1:$manager_port/v1/shardmaps/bench/datapath/assignments"

declare -A api_port admin_port sidecar_pid
start_sidecar() {  # start_sidecar NAME IP [MANAGER_PORT SHARD_MAP EXTRA_FLAGS...]
  local name=$1 ip=$2 manager=${3:-$manager_port} map=${4:-datapath}
  shift $(($# < 4 ? $# : 4))
  api_port[$name]=$(free_port)
  admin_port[$name]=$(free_port)
  local peer_port own_app_port=$app_port
  peer_port=$(free_port "$ip")
  if [[ $app == go-counter ]]; then
    start_go_counter "$name"
    own_app_port=${app_port_of[$name]}
  fi
  GLIBC_TUNABLES=$sidecar_tunables \
    "$sidecar" --pod-name="bench-$name" --pod-namespace=bench --pod-uid="uid-$name" --pod-ip="$ip" \
      --shard-map="$map" --version=1.0.0 --app-port="$own_app_port" --api-port="${api_port[$name]}" \
      --peer-port="$peer_port" --admin-port="${admin_port[$name]}" --admin-bind-address=127.0.0.1 \
      --map-source=manager --manager-address="127.0.0.1:$manager" "$@" \
      >"$out/sidecar-$name.log" 2>&1 &
  sidecar_pids+=($!)
  sidecar_pid[$name]=$!
}
start_sidecar b 127.0.0.3 "$manager_port" datapath --peer-auth=none
start_sidecar a 127.0.0.2 "$manager_port" datapath --peer-auth=none
# The authenticated pair: its own ShardMap (D owns every shard) and tokens.
issuer=https://kshard-bench.invalid
python3 "$here/tokens.py" "$work" "$issuer" bench datapath-auth bench-c bench-d
auth_manager_port=$(free_port)
python3 "$root/e2e/support/stub_manager.py" "$auth_manager_port" bench datapath-auth "$shards" \
  --owner bench-d --token-file "$work/token-operator" >"$out/manager-auth.log" 2>&1 &
pids+=($!)
wait_until 10 "the second stub manager listening" \
  curl -fsS "http://127.0.0.1:$auth_manager_port/v1/shardmaps/bench/datapath-auth/assignments"
for name in d c; do
  start_sidecar "$name" "127.0.0.$([[ $name == c ]] && echo 6 || echo 7)" "$auth_manager_port" \
    datapath-auth --peer-auth=token --issuer-keys-file="$work/jwks.json" --issuer="$issuer" \
    --operator-identity=system:serviceaccount:bench:stub-manager \
    --peer-token-file="$work/token-bench-$name"
done
# The pair over plain HTTP: its own ShardMap, F owns every shard.
http_manager_port=$(free_port)
python3 "$root/e2e/support/stub_manager.py" "$http_manager_port" bench datapath-http "$shards" \
  --owner bench-f >"$out/manager-http.log" 2>&1 &
pids+=($!)
wait_until 10 "the third stub manager listening" \
  curl -fsS "http://127.0.0.1:$http_manager_port/v1/shardmaps/bench/datapath-http/assignments"
for name in f e; do
  start_sidecar "$name" "127.0.0.$([[ $name == e ]] && echo 8 || echo 9)" "$http_manager_port" \
    datapath-http --peer-transport=http --peer-auth=none
done
for name in a b c d e f; do
  wait_until 60 "sidecar $name ready" curl -fsS "http://127.0.0.1:${admin_port[$name]}/readyz"
done

direct_url="http://127.0.0.1:$app_port"
nginx_url="http://127.0.0.4:$nginx1_port"
sidecar_url="http://127.0.0.1:${api_port[a]}"
wait_until 10 "a message through nginx" post_ok "$nginx_url$app_path/probe"
# A message through A must come back from B's app: the whole forwarding path works.
forwarded_by_b() {
  curl -fsS -D - -o /dev/null -X POST --data-binary '{"op":"get"}' "$sidecar_url$api_path/probe" |
    tr -d '\r' | grep -qix 'kshard-owner: bench-b'
}
wait_until 30 "a message through sidecar A answered by owner B" forwarded_by_b
forwarded_by_d() {
  curl -fsS -D - -o /dev/null -X POST --data-binary '{"op":"get"}' \
    "http://127.0.0.1:${api_port[c]}$api_path/probe" | tr -d '\r' | grep -qix 'kshard-owner: bench-d'
}
wait_until 30 "a message through sidecar C answered by owner D (checking C's token)" forwarded_by_d
forwarded_by_f() {
  curl -fsS -D - -o /dev/null -X POST --data-binary '{"op":"get"}' \
    "http://127.0.0.1:${api_port[e]}$api_path/probe" | tr -d '\r' | grep -qix 'kshard-owner: bench-f'
}
wait_until 30 "a message through sidecar E answered by owner F (over plain HTTP)" forwarded_by_f
# And D refuses a forwarded message without a token: the check is on.
unauthenticated=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Kshard-Shard: 1' \
  "http://$(sed -n 's/.*"peer_api":"\([^"]*\)".*/\1/p' "$out/sidecar-d.log" | head -1)/v1/peer/entities/bench/probe")
[[ $unauthenticated == 401 ]] || die "sidecar D answered $unauthenticated to a forwarded message without a token, not 401"
log "ready: app 127.0.0.1:$app_port, nginx 127.0.0.4:$nginx1_port → 127.0.0.5:$nginx2_port," \
  "sidecar A 127.0.0.1:${api_port[a]} → B (peer 127.0.0.3)"

# --- Measurements -------------------------------------------------------------------------------

# "owner" is not one of the issue's topologies: messages sent to B itself, delivered locally, to
# tell the cost of one sidecar from the cost of the forwarding hop.
topologies=(direct nginx sidecar owner sidecar-auth sidecar-http)
declare -A url=([direct]=$direct_url [nginx]=$nginx_url [sidecar]=$sidecar_url
  [owner]="http://127.0.0.1:${api_port[b]}" [sidecar-auth]="http://127.0.0.1:${api_port[c]}"
  [sidecar-http]="http://127.0.0.1:${api_port[e]}")
# The processes between the load generator and the app (with their children: nginx's workers).
declare -A proxies=([direct]="" [nginx]="${nginx_pids[*]}"
  [sidecar]="${sidecar_pid[a]} ${sidecar_pid[b]}" [owner]="${sidecar_pid[b]}"
  [sidecar-auth]="${sidecar_pid[c]} ${sidecar_pid[d]}"
  [sidecar-http]="${sidecar_pid[e]} ${sidecar_pid[f]}")
# The app that serves each topology (with the stub app, always the one) and the path it is sent.
declare -A app_of=([direct]=$app_pid [nginx]=$app_pid [sidecar]=${app_pid_of[b]:-$app_pid}
  [owner]=${app_pid_of[b]:-$app_pid} [sidecar-auth]=${app_pid_of[d]:-$app_pid}
  [sidecar-http]=${app_pid_of[f]:-$app_pid})
declare -A path=([direct]=$app_path [nginx]=$app_path [sidecar]=$api_path [owner]=$api_path
  [sidecar-auth]=$api_path [sidecar-http]=$api_path)

usage() { if (($#)); then python3 "$here/proc_usage.py" "$@"; else echo "0 0 0"; fi; }

# wrk_point TOPOLOGY ROUND CONNECTIONS: throughput at that many connections; prints "requests/s
# errors proxy_cpu_us proxy_switches app_cpu_us proxy_user_us", the last four per request
# (proxy_user_us: the part of proxy_cpu_us spent in user space).
wrk_point() {
  local t=$1 r=$2 c=$3 file=$out/wrk-$1-$2-c$3.txt
  local proxy_before app_before proxy_after app_after
  # ${proxies[$t]} unquoted: a list of pids, possibly empty.
  proxy_before=$(usage ${proxies[$t]})
  app_before=$(usage "${app_of[$t]}")
  ENTITY_IDS=$entity_ids ENTITY_PATH="${path[$t]}/" BODY=$body wrk -t "$wrk_threads" -c "$c" -d "${duration}s" --latency \
    -s "$here/post.lua" "${url[$t]}" >"$file"
  proxy_after=$(usage ${proxies[$t]})
  app_after=$(usage "${app_of[$t]}")
  awk -v pb="$proxy_before" -v pa="$proxy_after" -v ab="$app_before" -v aa="$app_after" '
    / requests in / { requests = $1 }
    /^Requests\/sec:/ { rps = $2 }
    /Non-2xx or 3xx responses:/ { errors += $NF }
    /Socket errors:/ { gsub(",", ""); errors += $4 + $6 + $8 + $10 }
    END {
      split(pb, b, " "); split(pa, a, " "); split(ab, c, " "); split(aa, d, " ")
      n = requests > 0 ? requests : 1
      printf "%.0f %d %.1f %.2f %.1f %.1f\n", rps, errors, (a[1] - b[1]) * 1e6 / n,
        (a[2] - b[2]) / n, (d[1] - c[1]) * 1e6 / n, (a[3] - b[3]) * 1e6 / n
    }' "$file"
}

# fortio_point TOPOLOGY ROUND [uniform]: latency at $qps; prints "p50 p90 p99 qps errors
# proxy_cpu_us proxy_switches" (ms; the last two per request). By default fortio's connections
# send together (each connection's first request at the same instant, then one per connection
# every connections/QPS seconds), so every 16 ms 16 requests arrive at once; "uniform" spreads
# the connections' requests evenly over that interval instead (fortio -uniform).
fortio_point() {
  local t=$1 r=$2 pacing=${3:-}
  local name=fortio${pacing:+-$pacing}-$t-$r
  local file=$out/$name.json
  local before after
  before=$(usage ${proxies[$t]})
  "$fortio" load -quiet -qps "$qps" -c "$fortio_connections" -t "${duration}s" "${fortio_body[@]}" \
    -r "$fortio_resolution" ${pacing:+-$pacing} -p 50,90,99 -json "$file" \
    "${url[$t]}${path[$t]}/{uuid}" >"$out/$name.log" 2>&1
  after=$(usage ${proxies[$t]})
  python3 - "$file" "$before" "$after" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = {x["Percentile"]: x["Value"] * 1000 for x in d["DurationHistogram"]["Percentiles"]}
n = d["DurationHistogram"]["Count"]
errors = n - d["RetCodes"].get("200", 0)
(cpu0, sw0), (cpu1, sw1) = (map(float, a.split()[:2]) for a in sys.argv[2:4])
print(f'{p[50]:.3f} {p[90]:.3f} {p[99]:.3f} {d["ActualQPS"]:.0f} {errors} '
      f'{(cpu1 - cpu0) * 1e6 / max(n, 1):.1f} {(sw1 - sw0) / max(n, 1):.2f}')
EOF
}

log "$rounds round(s); per topology: wrk ${duration} s at each of $wrk_connections connections," \
  "fortio ${duration} s at $qps requests/s, with its connections sending together, then spread evenly"
results=$out/rounds.txt
: >"$results"
for r in $(seq 1 "$rounds"); do
  for t in "${topologies[@]}"; do
    ENTITY_IDS=$entity_ids ENTITY_PATH="${path[$t]}/" BODY=$body \
      wrk -t "$wrk_threads" -c 32 -d "${warmup}s" -s "$here/post.lua" \
      "${url[$t]}" >/dev/null
    for c in $wrk_connections; do
      read -r rps errors proxy_cpu proxy_switches app_cpu proxy_user < <(wrk_point "$t" "$r" "$c")
      log "round $r $t, $c connections: $rps requests/s ($errors errors); per request: proxies" \
        "$proxy_cpu µs CPU ($proxy_user µs user) and $proxy_switches context switches, app" \
        "$app_cpu µs CPU"
      echo "wrk $r $t $c $rps $errors $proxy_cpu $proxy_switches $app_cpu $proxy_user" >>"$results"
    done
    read -r p50 p90 p99 actual errors proxy_cpu proxy_switches < <(fortio_point "$t" "$r")
    log "round $r $t, $actual requests/s: p50 $p50 ms, p90 $p90 ms, p99 $p99 ms ($errors errors);" \
      "per request: proxies $proxy_cpu µs CPU and $proxy_switches context switches"
    echo "fortio $r $t $p50 $p90 $p99 $actual $errors $proxy_cpu $proxy_switches" >>"$results"
    read -r p50 p90 p99 actual errors proxy_cpu proxy_switches < <(fortio_point "$t" "$r" uniform)
    log "round $r $t, $actual requests/s spread evenly: p50 $p50 ms, p90 $p90 ms, p99 $p99 ms" \
      "($errors errors); per request: proxies $proxy_cpu µs CPU and $proxy_switches context switches"
    echo "fortio-uniform $r $t $p50 $p90 $p99 $actual $errors $proxy_cpu $proxy_switches" >>"$results"
  done
done

# What the sidecars counted, to show the path taken (A forwards, B delivers).
for name in a b c d e f; do
  curl -fsS "http://127.0.0.1:${admin_port[$name]}/metrics" |
    grep '^kshard_sidecar_messages_total' | grep -v ' 0$' >"$out/metrics-$name.txt" || true
done

# --- The tables ----------------------------------------------------------------------------------

{
  echo "App behind every topology: $app."
  echo
  python3 "$here/report.py" "$results"
} >"$out/results.md"
cat "$out/results.md"
log "wrote $out/results.md (raw wrk and fortio output beside it)"
