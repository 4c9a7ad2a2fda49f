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
# table for the docs), rolling.md (the rolling update with each setting, kshard's hold on and
# off), timings.txt (wall time of each run), and the PNGs in docs/img/.
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
# kshard's rolling update without the operator's unregister hold, at every size: the figures
# before the hold existed.
run rolling-hold-off --sizes "$sizes" --scenarios rolling-update --strategies kshard \
  --max-unregister-hold 0 "$@"
# The rolling update again, without old pods leaving before new ones are ready, with a drain
# longer than the start delay, and with new pods that take longer to start than kshard's hold
# lasts: the settings the rolling-update figures depend on; kshard also without the hold.
for variant in "max-unavailable 0" "drain 30s" "start-delay 90s"; do
  name=rolling-${variant// /-}
  run "$name" --sizes 10000x1000 --scenarios rolling-update --$variant
  run "$name-hold-off" --sizes 10000x1000 --scenarios rolling-update --strategies kshard \
    --$variant --max-unregister-hold 0
done

# Durations as the docs write them.
human='
  function human(s) {
    if (s < 60) return sprintf("%d s", s)
    if (s < 3600) return sprintf("%d min %02d s", s / 60, s % 60)
    if (s < 86400) return sprintf("%d h %02d min", s / 3600, (s % 3600) / 60)
    return sprintf("%.1f days", s / 86400)
  }'

# One data file per size and figure: a row per scenario, a column per strategy, and a last one
# for kshard without the unregister hold ("?" where not run: only the rolling update).
awk -F, -v dir="$out" '
  FNR == 1 { next }
  {
    strategy = FILENAME ~ /rolling-hold-off\.csv$/ ? "kshard-hold-off" : $6
    size = $1 "x" ($2 < $3 ? $2 : $3)
    if (!(size in seen)) { seen[size] = 1; order[++n] = size }
    key = size SUBSEP $5
    if (!((key) in rows)) { rows[key] = 1; scen[size, ++m[size]] = $5 }
    moves[key, strategy] = $8
    secs[key, strategy] = $12
  }
  END {
    header = "kshard akka-classic akka ring kshard-hold-off"
    k = split(header, strategies, " ")
    for (i = 1; i <= n; i++) {
      size = order[i]
      for (what = 1; what <= 2; what++) {
        file = dir "/" (what == 1 ? "moves-" : "settle-") size ".dat"
        print "scenario " header > file
        for (j = 1; j <= m[size]; j++) {
          line = scen[size, j]
          key = size SUBSEP scen[size, j]
          for (s = 1; s <= k; s++) {
            v = what == 1 ? moves[key, strategies[s]] : secs[key, strategies[s]]
            line = line " " (v == "" ? "?" : v)
          }
          print line > file
        }
        close(file)
      }
    }
  }' "$out/results.csv" "$out/rolling-hold-off.csv"

# The table for docs/benchmarks.md.
awk -F, "$human"'
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

# The rolling-update tables for docs/benchmarks.md: kshard with the hold on and off at every
# size, then each setting at 10,000 x 1,000 (moves / shard).
awk -F, "$human"'
  FNR == 1 { next }
  $5 == "rolling-update" {
    f = FILENAME
    sub(/.*\//, "", f)
    sub(/\.csv$/, "", f)
    size = $1 "x" $2
    if (f == "results" && $6 == "kshard") order[++n] = size
    perShard[f, size, $6] = sprintf("%.3f", $8)
    most[f, size, $6] = $9
    settle[f, size, $6] = human($12) ($13 == "true" ? "" : " (not settled)")
  }
  END {
    print "| shards × N | moves / shard, hold on | hold off | max moves of one shard, on | off | settled after, on | off |"
    print "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    for (i = 1; i <= n; i++) {
      s = order[i]
      split(s, part, "x")
      printf "| %s × %s | %s | %s | %s | %s | %s | %s |\n", part[1], part[2],
        perShard["results", s, "kshard"], perShard["rolling-hold-off", s, "kshard"],
        most["results", s, "kshard"], most["rolling-hold-off", s, "kshard"],
        settle["results", s, "kshard"], settle["rolling-hold-off", s, "kshard"]
    }
    print ""
    print "| rolling update at 10,000 × 1,000 | kshard | kshard, hold off | akka-classic | akka | ring |"
    print "| --- | ---: | ---: | ---: | ---: | ---: |"
    k = split("results rolling-max-unavailable-0 rolling-drain-30s rolling-start-delay-90s", runs, " ")
    label["results"] = "defaults (maxUnavailable 25%, start delay 10 s, drain 5 s)"
    label["rolling-max-unavailable-0"] = "`--max-unavailable 0`"
    label["rolling-drain-30s"] = "`--drain 30s` (drain longer than the start delay)"
    label["rolling-start-delay-90s"] = "`--start-delay 90s` (longer than the hold)"
    for (i = 1; i <= k; i++) {
      r = runs[i]
      off = (r == "results" ? "rolling" : r) "-hold-off"
      s = "10000x1000"
      printf "| %s | %s | %s | %s | %s | %s |\n", label[r], perShard[r, s, "kshard"],
        perShard[off, s, "kshard"], perShard[r, s, "akka-classic"], perShard[r, s, "akka"],
        perShard[r, s, "ring"]
    }
  }' "$out/results.csv" "$out"/rolling-*.csv >"$out/rolling.md"

gnuplot -e "datadir='$out'; imgdir='$img'; sizes='${sizes//,/ }'" "$root/bench/simulate/plot.gp"
echo "wrote $out/results.csv, $out/results.md, $out/rolling.md and $img/simulate-*.png" >&2
