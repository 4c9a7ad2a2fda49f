# Plots of the rebalance simulation (bench/simulate/run.sh) for docs/benchmarks.md.
# Variables set by run.sh: datadir (the .dat files), imgdir (where the PNGs go), sizes (e.g.
# "300x3 10000x1000 100000x10000"). Each moves-<size>.dat / settle-<size>.dat has a header line,
# then a row per scenario with one column per strategy: kshard, akka-classic, akka, ring.

set terminal pngcairo size 1800,560 font "DejaVu Sans,11" noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set xtics nomirror
set linetype 1 lc rgb "#1b9e77"
set linetype 2 lc rgb "#d95f02"
set linetype 3 lc rgb "#7570b3"
set linetype 4 lc rgb "#e7298a"
n = words(sizes)
# One legend for the figure, under its title; panels side by side, one per size.
keyAtTop = "set key at screen 0.5, screen 0.915 center horizontal maxrows 1 width 2"
layout = "margins 0.05, 0.99, 0.08, 0.80 spacing 0.04, 0"

set output imgdir."/simulate-moves.png"
eval "set multiplot layout 1, n title 'Shard moves per shard, by scenario (lower is better; dashed: the rolling-update goal, 1.05)' ".layout
set yrange [0:1.8]
do for [i = 1:n] {
  size = word(sizes, i)
  set title sprintf("%s (shards x pods)", size)
  set ylabel (i == 1 ? "moves / shards" : "")
  if (i == 1) { eval keyAtTop } else { unset key }
  plot datadir."/moves-".size.".dat" using 2:xtic(1) title columnheader(2), \
       '' using 3 title columnheader(3), '' using 4 title columnheader(4), \
       '' using 5 title columnheader(5), \
       1.05 with lines dt 2 lw 2 lc rgb "#444444" notitle
}
unset multiplot

set output imgdir."/simulate-settle-time.png"
eval "set multiplot layout 1, n title 'Simulated time from the event until the assignment stops changing (log scale; lower is better)' ".layout
set logscale y
set yrange [1:1e6]
set format y "%.0s %cs"
do for [i = 1:n] {
  size = word(sizes, i)
  set title sprintf("%s (shards x pods)", size)
  set ylabel (i == 1 ? "seconds" : "")
  if (i == 1) { eval keyAtTop } else { unset key }
  plot datadir."/settle-".size.".dat" using 2:xtic(1) title columnheader(2), \
       '' using 3 title columnheader(3), '' using 4 title columnheader(4), \
       '' using 5 title columnheader(5)
}
unset multiplot
