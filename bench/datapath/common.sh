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
