# Process helpers of the cluster scripts: components run detached, each with a pid file in
# .cluster/pids and its output in .cluster/logs/<name>.log. Source after lib.sh.

pid_file() { echo "$CLUSTER_DIR/pids/$1.pid"; }

# proc_alive <name>: the recorded process still runs (and is still the program we started).
proc_alive() {
  local f pid
  f="$(pid_file "$1")"
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(cat "$f.comm" 2>/dev/null)" ]
}

# proc_start <name> <executable> <args...>: runs it detached in its own session.
proc_start() {
  local name="$1" exe="$2"
  shift 2
  mkdir -p "$CLUSTER_DIR/pids" "$CLUSTER_DIR/logs"
  setsid "$exe" "$@" >>"$CLUSTER_DIR/logs/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$(pid_file "$name")"
  # The kernel's comm is the executable's name cut to 15 bytes; it tells a reused pid apart.
  local comm
  comm="$(basename "$exe" | cut -c1-15)"
  echo "$comm" >"$(pid_file "$name").comm"
  # Until the forked shell has exec'd setsid and setsid the program, comm is "bash" or "setsid":
  # wait for the exec, or proc_alive right after this would call the new process dead.
  local i
  for ((i = 0; i < 100; i++)); do
    [ -d "/proc/$pid" ] || break
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] && break
    sleep 0.05
  done
  log "started $name (pid $pid, log .cluster/logs/$name.log)"
}

# proc_stop <name> <grace seconds>: SIGTERM, then SIGKILL after the grace period.
proc_stop() {
  local name="$1" grace="$2" pid i
  if ! proc_alive "$name"; then
    rm -f "$(pid_file "$name")" "$(pid_file "$name").comm"
    return 0
  fi
  pid="$(cat "$(pid_file "$name")")"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    [ -d "/proc/$pid" ] || break
    sleep 0.1
  done
  if [ -d "/proc/$pid" ]; then
    log "$name did not stop within ${grace} s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while [ -d "/proc/$pid" ]; do sleep 0.1; done
  fi
  rm -f "$(pid_file "$name")" "$(pid_file "$name").comm"
  log "stopped $name"
}

# wait_until <seconds> <what> <command...>: polls the command until it succeeds.
wait_until() {
  local secs="$1" what="$2" start
  shift 2
  start=$(date +%s)
  until "$@"; do
    if (($(date +%s) - start >= secs)); then
      die "timed out after ${secs} s waiting for $what"
    fi
    sleep 0.5
  done
}
