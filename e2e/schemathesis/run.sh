#!/usr/bin/env bash
# Property-based API tests of kshard-sidecar with Schemathesis, against docs/openapi/sidecar.yaml.
#
# Starts the real kshard-sidecar (ASan+UBSan build) on loopback with --map-source=manager, in
# front of a stub app (stub_app.py) and a stub manager (e2e/support/stub_manager.py) that assigns
# it every shard, waits until it is ready, then runs Schemathesis against each of its listeners in
# turn: the app API, the peer API, the admin endpoints. Checks: no undocumented 5xx, statuses and
# content types as documented, responses matching their schemas. Afterwards the sidecar must
# still be alive and ready, must drain (POST /v1/drain → 200, unregistered at the manager) and
# exit 0 on SIGTERM, with no sanitizer report in its log.
#
# Deterministic and bounded: fixed seed, one worker, SCHEMATHESIS_EXAMPLES examples per operation
# (default 60; see schemathesis.toml). KSHARD_SIDECAR=<path> uses an existing sidecar binary
# instead of building one in build/schemathesis/cmake.
#
# The operator's manager API (docs/openapi/manager.yaml) is not run here: kshard-operator needs a
# Kubernetes API server to start (leader election, the ShardMap informer); see the README.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=e2e/schemathesis
work=build/schemathesis
mkdir -p "$work/logs"
examples=${SCHEMATHESIS_EXAMPLES:-60}

# --- The sidecar binary.
sidecar=${KSHARD_SIDECAR:-}
if [[ -z $sidecar ]]; then
  echo "schemathesis: building kshard-sidecar (ASan+UBSan) in $work/cmake"
  if ! { cmake -S . -B "$work/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="-O1 -g" \
           -DKSHARD_SANITIZE=address,undefined -DKSHARD_BUILD_TESTS=OFF -DKSHARD_BUILD_BENCH=OFF &&
         cmake --build "$work/cmake" --target kshard-sidecar; } >"$work/logs/build.log" 2>&1; then
    tail -40 "$work/logs/build.log"
    exit 1
  fi
  sidecar=$work/cmake/bin/kshard-sidecar
fi

# --- Schemathesis, pinned, in a venv.
schemathesis=$(bash "$here/venv.sh")

# Five distinct ports that were free a moment ago, below the kernel's range for outgoing
# connections (a port bind(0) hands out may go to the next outgoing connection before the sidecar
# binds it).
read -r app_port manager_port api_port peer_port admin_port < <(python3 "$here/../../tests/support/free_ports.py" 5)

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

python3 "$here/stub_app.py" "$app_port" >"$work/logs/app.log" 2>&1 &
pids+=($!)
python3 e2e/support/stub_manager.py "$manager_port" demo counter 64 --send-timeout 2s \
  --handoff-timeout 2s --entity-idle-timeout 30s --ping-timeout 1s >"$work/logs/manager.log" 2>&1 &
pids+=($!)
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$sidecar" \
  --pod-name=p1 --pod-namespace=demo --pod-uid=uid-p1 --pod-ip=127.0.0.1 --host-ip=127.0.0.1 \
  --shard-map=counter --version=1.0.0 --app-port="$app_port" --api-port="$api_port" \
  --peer-port="$peer_port" --admin-port="$admin_port" --admin-bind-address=127.0.0.1 \
  --map-source=manager --manager-address="127.0.0.1:$manager_port" --map-poll-interval=200ms \
  --peer-auth=none \
  >"$work/logs/sidecar.log" 2>&1 &
sidecar_pid=$!
pids+=("$sidecar_pid")

ready() { [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin_port/readyz") == 200 ]]; }
for _ in $(seq 300); do
  ready && break
  kill -0 "$sidecar_pid" 2>/dev/null || { echo "schemathesis: the sidecar exited at start"; tail -30 "$work/logs/sidecar.log"; exit 1; }
  sleep 0.1
done
ready || { echo "schemathesis: the sidecar did not become ready in 30 s"; tail -30 "$work/logs/sidecar.log"; exit 1; }
# Ready means registered; the stub assigns the shards right after answering the register.
for _ in $(seq 100); do
  grep -q '^assign ' "$work/logs/manager.log" && break
  sleep 0.1
done

failed=0
run() {  # run <tag> <port>
  local tag=$1 port=$2
  echo "schemathesis: $tag API on 127.0.0.1:$port ($examples examples per operation)"
  if ! (cd "$here" && "$schemathesis" --config-file schemathesis.toml run \
          "$root/docs/openapi/sidecar.yaml" --url "http://127.0.0.1:$port" \
          --include-tag "$tag" --exclude-operation-id drain --exclude-operation-id drainHook \
          --max-examples "$examples" --no-color \
          --report junit --report-junit-path "$root/$work/logs/$tag.junit.xml") \
        >"$work/logs/$tag.log" 2>&1; then
    failed=1
    sed -n '/FAILURES/,$p' "$work/logs/$tag.log" | head -80
    echo "schemathesis: $tag API failed; full output: $work/logs/$tag.log"
  else
    # "95 generated, 95 passed" and the closing line; nothing found must not end the script.
    { grep -E '[0-9]+ generated|No issues found|operations tested' "$work/logs/$tag.log" || true; } |
      sed 's/^ */    /' | head -4
  fi
}
run app "$api_port"
run peer "$peer_port"
run admin "$admin_port"

# --- The sidecar survived, still serves, drains and stops cleanly.
kill -0 "$sidecar_pid" 2>/dev/null || { echo "schemathesis: the sidecar died during the run"; tail -40 "$work/logs/sidecar.log"; exit 1; }
ready || { echo "schemathesis: the sidecar is alive but no longer ready"; failed=1; }
drain=$(curl -s -m 60 -X POST -w ' %{http_code}' "http://127.0.0.1:$api_port/v1/drain")
if [[ $drain != '{"drained":true} 200' ]]; then
  echo "schemathesis: POST /v1/drain answered: $drain"
  failed=1
fi
grep -q '^unregister ' "$work/logs/manager.log" || { echo "schemathesis: the drain did not unregister"; failed=1; }
kill -TERM "$sidecar_pid"
status=0
for _ in $(seq 100); do kill -0 "$sidecar_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$sidecar_pid" 2>/dev/null; then
  echo "schemathesis: the sidecar did not exit within 10 s of SIGTERM"
  failed=1
else
  wait "$sidecar_pid" || status=$?
  ((status == 0)) || { echo "schemathesis: the sidecar exited with $status"; failed=1; }
fi
if grep -qE 'ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer' "$work/logs/sidecar.log"; then
  echo "schemathesis: sanitizer report in $work/logs/sidecar.log:"
  grep -A20 -E 'ERROR: AddressSanitizer|runtime error:' "$work/logs/sidecar.log" | head -40
  failed=1
fi

if ((failed)); then
  echo "schemathesis: FAILED (logs in $work/logs/)"
  exit 1
fi
echo "schemathesis: ok — sidecar alive, drained and stopped cleanly (logs in $work/logs/)"
