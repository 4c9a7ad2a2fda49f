# Shared by bench/datapath/run.sh and bench/datapath/instructions.sh (sourced; needs $root).

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# A port that was free a moment ago on the address (127.0.0.1 by default), below the kernel's
# range for outgoing connections; the state file (FREE_PORTS_STATE, removed by the caller's
# cleanup) keeps one run from getting the same port twice.
FREE_PORTS_STATE=$(mktemp)
export FREE_PORTS_STATE
free_port() {
  python3 "$root/tests/support/free_ports.py" 1 "${1:-127.0.0.1}"
}

# wait_until SECONDS WHAT CMD...: runs CMD every 100 ms until it succeeds.
wait_until() {
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what did not happen within $limit s"
    sleep 0.1
  done
}

# The sidecar image's allocator settings (Dockerfile, the sidecar stage), which the benchmarks
# run the sidecars with unless SIDECAR_GLIBC_TUNABLES says otherwise (empty: glibc's defaults).
sidecar_tunables() {
  local image
  image=$(sed -n 's/^ENV GLIBC_TUNABLES=\(.*\)$/\1/p' "$root/Dockerfile")
  [[ -n $image ]] || die "Dockerfile sets no GLIBC_TUNABLES for the sidecar image"
  printf '%s\n' "${SIDECAR_GLIBC_TUNABLES-$image}"
}

# fortio (FORTIO, or installed from the Go module proxy into the cache the local cluster's Go
# builds use, e2e/cluster/lib.sh's setup_go): prints its path. fortio 1.69 and later import
# grol.io/grol, whose module zip the module proxy does not serve to this machine (403); 1.68.2
# is the last release without it.
install_fortio() {
  local cache=${KSHARD_CACHE:-$HOME/.cache/kshard} version=${FORTIO_VERSION:-v1.68.2}
  local fortio=${FORTIO:-$cache/go/bin/fortio}
  if [[ ! -x $fortio ]]; then
    command -v go >/dev/null || [[ -x /usr/local/go/bin/go ]] || die "no Go toolchain to install fortio with"
    log "installing fortio $version into $cache/go/bin"
    (
      export PATH="$PATH:/usr/local/go/bin"
      export GOPATH="$cache/go" GOBIN="$cache/go/bin"
      export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build"
      export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GONOSUMDB="*" GOSUMDB=off CGO_ENABLED=0
      go install "fortio.org/fortio@$version" >&2
    ) || die "could not install fortio"
    fortio=$cache/go/bin/fortio
  fi
  printf '%s\n' "$fortio"
}

# Sets `sidecar` and `stub_app`: SIDECAR and STUB_APP when given, else built (release preset).
datapath_binaries() {
  sidecar=${SIDECAR:-}
  stub_app=${STUB_APP:-}
  if [[ -z $sidecar || -z $stub_app ]]; then
    log "building kshard-sidecar and datapath_stub_app (release preset)"
    (cd "$root" && cmake --preset release >/dev/null &&
      cmake --build --preset release --target kshard-sidecar datapath_stub_app >&2)
    sidecar=${sidecar:-$root/build/bin/kshard-sidecar}
    stub_app=${stub_app:-$root/build/bin/datapath_stub_app}
  fi
}

# A small message every app of the benchmarks accepts: the stub app any body, the counter examples
# their {"op":"get"}.
post_ok() { curl -fsS -o /dev/null -X POST --data-binary '{"op":"get"}' "$1"; }

# The Go counter example (examples/go-counter), GO_COUNTER or built as images/build.sh builds it
# (the local cluster's Go settings, -trimpath) into build/examples/bin: prints its path.
go_counter_binary() {
  if [[ -n ${GO_COUNTER:-} ]]; then
    printf '%s\n' "$GO_COUNTER"
    return
  fi
  log "building examples/go-counter"
  (
    source "$root/e2e/cluster/lib.sh"
    setup_go
    cd "$root/examples/go-counter" && go build -trimpath -o "$root/build/examples/bin/kshard-go-counter" .
  ) >&2 || die "could not build examples/go-counter"
  printf '%s\n' "$root/build/examples/bin/kshard-go-counter"
}

# Starts the stub app ($stub_app) on a free port of 127.0.0.1, logging to $out/app.log: sets
# app_port and app_pid, adds the pid to `pids`, and waits until it answers.
start_stub_app() {
  app_port=$(free_port)
  "$stub_app" --port "$app_port" >"$out/app.log" 2>&1 &
  app_pid=$!
  pids+=("$app_pid")
  wait_until 10 "the stub app listening" post_ok "http://127.0.0.1:$app_port/v1/entities/bench/probe"
}
