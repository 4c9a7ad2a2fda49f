#!/usr/bin/env bash
# The rebalance simulation of docs/benchmarks.md ("Rebalance simulation"): runs `kshardctl
# simulate` over the scenario matrix, writes CSV to build/bench/simulate/ and draws the plots into
# docs/img/ with gnuplot.
#
#   bench/simulate/run.sh                  # build kshardctl (release preset), run, plot
#   KSHARDCTL=build/x/bin/kshardctl bench/simulate/run.sh   # use a kshardctl already built
#   SIZES=300x3,10000x1000 bench/simulate/run.sh            # a smaller matrix
#
# Extra arguments go to every `kshardctl simulate` run of the main matrix (e.g. --seed 7).
# Output: results.csv (the matrix), rolling-*.csv (rolling update variants), results.md (the
# table for the docs), timings.txt (wall time of each run), and the PNGs in docs/img/.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/build/bench/simulate}
img=${IMG:-$root/docs/img}
sizes=${SIZES:-300x3,10000x1000,100000x10000}
kshardctl=${KSHARDCTL:-}
if [[ -z $kshardctl ]]; then
  (cd "$root" && cmake --preset release >/dev/null && cmake --build --preset release --target kshardctl)
  kshardctl=$root/build/bin/kshardctl
fi
mkdir -p "$out" "$img"
: >"$out/timings.txt"

# run NAME ARGS...: one `kshardctl simulate` into NAME.csv, its wall time into timings.txt.
run() {
  local name=$1
  shift
  local start=$EPOCHREALTIME
  "$kshardctl" simulate --format csv "$@" >"$out/$name.csv"
  local end=$EPOCHREALTIME
  awk -v n="$name" -v a="$start" -v b="$end" -v args="$*" \
    'BEGIN { printf "%s %.1f s: kshardctl simulate --format csv %s\n", n, b - a, args }' |
    tee -a "$out/timings.txt" >&2
}

run results --sizes "$sizes" "$@"
# The rolling update again, without old pods leaving before new ones are ready, and with a drain
# longer than the start delay: the two settings the rolling-update figures depend on.
run rolling-max-unavailable-0 --sizes 10000x1000 --scenarios rolling-update --max-unavailable 0
run rolling-drain-30s --sizes 10000x1000 --scenarios rolling-update --drain 30s

# One data file per size and figure: a row per scenario, a column per strategy.
awk -F, -v dir="$out" '
  NR == 1 { next }
  {
    size = $1 "x" ($2 < $3 ? $2 : $3)
    if (!(size in seen)) { seen[size] = 1; order[++n] = size }
    key = size SUBSEP $5
    if (!((key) in rows)) { rows[key] = 1; scen[size, ++m[size]] = $5 }
    moves[key, $6] = $8
    secs[key, $6] = $12
  }
  END {
    split("kshard akka-classic akka ring", strategies, " ")
    for (i = 1; i <= n; i++) {
      size = order[i]
      for (what = 1; what <= 2; what++) {
        file = dir "/" (what == 1 ? "moves-" : "settle-") size ".dat"
        print "scenario kshard akka-classic akka ring" > file
        for (j = 1; j <= m[size]; j++) {
          line = scen[size, j]
          for (k = 1; k <= 4; k++) {
            key = size SUBSEP scen[size, j]
            line = line " " (what == 1 ? moves[key, strategies[k]] : secs[key, strategies[k]])
          }
          print line > file
        }
        close(file)
      }
    }
  }' "$out/results.csv"

# The table for docs/benchmarks.md.
awk -F, '
  function human(s,   h, m) {
    if (s < 60) return sprintf("%d s", s)
    if (s < 3600) return sprintf("%d min %02d s", s / 60, s % 60)
    if (s < 86400) return sprintf("%d h %02d min", s / 3600, (s % 3600) / 60)
    return sprintf("%.1f days", s / 86400)
  }
  NR == 1 {
    print "| shards × N | pods | scenario | strategy | moves | moves / shard | max moves of one shard | rounds | settled after | worst imbalance | final imbalance |"
    print "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    next
  }
  {
    n = $2 < $3 ? $2 : $3
    pods = $2 " → " $3
    if ($4 > 0) pods = pods ", " $4 " crash"
    settled = human($12) ($13 == "true" ? "" : " (not settled)")
    printf "| %s × %s | %s | %s | %s | %s | %.3f | %s | %s | %s | %s | %s |\n", $1, n, pods, $5, $6, $7, $8, $9, $11, settled, $14, $15
  }' "$out/results.csv" >"$out/results.md"

gnuplot -e "datadir='$out'; imgdir='$img'; sizes='${sizes//,/ }'" "$root/bench/simulate/plot.gp"
echo "wrote $out/results.csv, $out/results.md and $img/simulate-*.png" >&2
