# Plots of the rebalance simulation (bench/simulate/run.sh) for docs/benchmarks.md.
# Variables set by run.sh: datadir (the .dat files), imgdir (where the PNGs go), sizes (e.g.
# "300x3 10000x1000 100000x10000"). Each moves-<size>.dat / settle-<size>.dat has a header line,
# then a row per scenario with one column per strategy: kshard, akka-classic, akka, ring, and
# kshard-hold-off (kshard with --max-unregister-hold 0; "?" but for the rolling update).

set terminal pngcairo size 1800,560 font "DejaVu Sans,11" noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set linetype 1 lc rgb "#1b9e77"
set linetype 2 lc rgb "#d95f02"
set linetype 3 lc rgb "#7570b3"
set linetype 4 lc rgb "#e7298a"
set linetype 5 lc rgb "#a6d8c8"
set datafile missing "?"
set key autotitle columnheader  # the first line of a .dat file is its header
n = words(sizes)
# The .dat columns after the scenario, in order: the series of every panel.
series = "kshard akka-classic akka ring kshard-hold-off"
# Panels side by side, one per size, under the figure's title and one legend for all of them.
# Placed by hand: a key is never wider than its plot, so the legend is a plot of its own, of
# nothing, as wide as the figure.
left = 0.05
right = 0.99
gap = 0.04
width = (right - left - (n - 1) * gap) / n
panel(i) = sprintf("set lmargin at screen %f; set rmargin at screen %f; set tmargin at screen 0.80; set bmargin at screen 0.08", \
                   left + (i - 1) * (width + gap), left + (i - 1) * (width + gap) + width)
# What the legend's plot changes, as the panels want it.
axes = "set border; set xtics nomirror; set ytics mirror; set grid ytics; set autoscale x; unset key"
legend = "unset title; unset xlabel; unset ylabel; unset tics; unset border; unset grid; " . \
         "unset logscale; set xrange [0:1]; set yrange [0:1]; " . \
         sprintf("set lmargin at screen %f; set rmargin at screen %f; ", left, right) . \
         "set tmargin at screen 0.93; set bmargin at screen 0.90; " . \
         "set key at screen 0.5, screen 0.915 center horizontal maxrows 1 width 2; " . \
         "plot for [k = 1:words(series)] NaN with boxes lt k title word(series, k)"

set output imgdir."/simulate-moves.png"
set multiplot title 'Shard moves per shard, by scenario (lower is better; dashed: the rolling-update goal, 1.05)'
eval axes
set yrange [0:1.8]
do for [i = 1:n] {
  size = word(sizes, i)
  eval panel(i)
  set title sprintf("%s (shards x pods)", size)
  set ylabel (i == 1 ? "moves / shards" : "")
  plot for [k = 2:words(series) + 1] datadir."/moves-".size.".dat" using k:xtic(1), \
       1.05 with lines dt 2 lw 2 lc rgb "#444444"
}
eval legend
unset multiplot

set output imgdir."/simulate-settle-time.png"
set multiplot title 'Simulated time from the event until the assignment stops changing (log scale; lower is better)'
eval axes
set logscale y
set yrange [1:1e6]
set format y "%.0s %cs"
do for [i = 1:n] {
  size = word(sizes, i)
  eval panel(i)
  set title sprintf("%s (shards x pods)", size)
  set ylabel (i == 1 ? "seconds" : "")
  plot for [k = 2:words(series) + 1] datadir."/settle-".size.".dat" using k:xtic(1)
}
eval legend
unset multiplot
