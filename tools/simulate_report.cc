#include "tools/simulate_report.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "sharding/duration.h"

namespace kshard::tools {
namespace {

std::string fixed(double value, int decimals) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), "%.*f", decimals, value);
  return buf.data();
}

std::string seconds(SimTime t) { return fixed(std::chrono::duration<double>(t).count(), 3); }

// Whole seconds print as "36s"; the rest as Go prints durations.
std::string settledAfter(const SimulationResult& r) {
  std::string text = sharding::formatDuration(r.settleTime);
  if (!r.settled) text += " (not settled)";
  return text;
}

std::string podsColumn(const SimulationResult& r) {
  std::string text = std::to_string(r.podsBefore) + "->" + std::to_string(r.podsAfter);
  if (r.crashed > 0) text += " (" + std::to_string(r.crashed) + " crash)";
  return text;
}

}  // namespace

std::string formatTable(const std::vector<SimulationResult>& results) {
  const std::vector<std::string> header = {"shards",
                                           "pods",
                                           "scenario",
                                           "strategy",
                                           "moves",
                                           "moves/shard",
                                           "max moves of one shard",
                                           "placements",
                                           "rounds",
                                           "settled after",
                                           "worst imbalance",
                                           "final imbalance"};
  // Numbers are right-aligned (Markdown "---:"), text left-aligned.
  const std::vector<bool> numeric = {true, false, false, false, true, true,
                                     true, true,  true,  false, true, true};
  std::vector<std::vector<std::string>> rows;
  for (const SimulationResult& r : results) {
    rows.push_back({std::to_string(r.shards), podsColumn(r), std::string(scenarioName(r.scenario)),
                    std::string(strategyName(r.strategy)), std::to_string(r.moves),
                    fixed(r.movesPerShard(), 3), std::to_string(r.maxMovesOfOneShard),
                    std::to_string(r.placements), std::to_string(r.rounds), settledAfter(r),
                    std::to_string(r.worstImbalance), std::to_string(r.finalImbalance)});
  }
  std::vector<std::size_t> width(header.size(), 3);
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = std::max(width[c], header[c].size());
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      out += " " + (numeric[c] ? pad + cells[c] : cells[c] + pad) + " |";
    }
    return out + "\n";
  };
  std::string out = line(header);
  out += "|";
  for (std::size_t c = 0; c < header.size(); ++c) {
    out += " " + (numeric[c] ? std::string(width[c] - 1, '-') + ":" : std::string(width[c], '-')) +
           " |";
  }
  out += "\n";
  for (const auto& row : rows) out += line(row);
  return out;
}

std::string formatCsv(const std::vector<SimulationResult>& results) {
  std::string out =
      "shards,pods_before,pods_after,crashed,scenario,strategy,moves,moves_per_shard,"
      "max_moves_one_shard,placements,rounds,settle_seconds,settled,worst_imbalance,"
      "final_imbalance,unassigned\n";
  for (const SimulationResult& r : results) {
    out += std::to_string(r.shards) + "," + std::to_string(r.podsBefore) + "," +
           std::to_string(r.podsAfter) + "," + std::to_string(r.crashed) + "," +
           std::string(scenarioName(r.scenario)) + "," + std::string(strategyName(r.strategy)) +
           "," + std::to_string(r.moves) + "," + fixed(r.movesPerShard(), 4) + "," +
           std::to_string(r.maxMovesOfOneShard) + "," + std::to_string(r.placements) + "," +
           std::to_string(r.rounds) + "," + seconds(r.settleTime) + "," +
           (r.settled ? "true" : "false") + "," + std::to_string(r.worstImbalance) + "," +
           std::to_string(r.finalImbalance) + "," + std::to_string(r.unassigned) + "\n";
  }
  return out;
}

}  // namespace kshard::tools
