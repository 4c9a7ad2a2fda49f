// The output of `kshardctl simulate`: its results as a Markdown table (readable in a terminal and
// pasted as is into docs/benchmarks.md) or as CSV (for bench/simulate/plot.gp).
#pragma once

#include <string>
#include <vector>

#include "tools/simulate_run.h"

namespace kshard::tools {

// One row per result, in the order given. Columns: shards, pods (before->after), scenario,
// strategy, moves, moves/shard, max moves of one shard, placements, rounds, settled after,
// worst imbalance, final imbalance. A run that did not settle says so in "settled after".
std::string formatTable(const std::vector<SimulationResult>& results);

// Header line, then one line per result:
// shards,pods_before,pods_after,crashed,scenario,strategy,moves,moves_per_shard,
// max_moves_one_shard,placements,rounds,settle_seconds,settled,worst_imbalance,
// final_imbalance,unassigned
std::string formatCsv(const std::vector<SimulationResult>& results);

}  // namespace kshard::tools
