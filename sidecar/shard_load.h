// ShardLoad: what one owned shard costs, as its sidecar measures it (EntityRegistry::sampleLoad)
// and reports it (SidecarMetrics::showLoad).
#pragma once

#include <chrono>
#include <cstddef>

#include "sharding/shard_id.h"

namespace kshard::sidecar {

// How fast a shard's measured load forgets: a minute-old rate counts half.
inline constexpr std::chrono::seconds kLoadHalfLife{60};
// Rates below this (per second) are reported as none: a shard that went quiet reaches it within
// half an hour of half-lives instead of decaying forever.
inline constexpr double kNegligibleRate = 1e-9;

struct ShardLoad {
  sharding::ShardId shard = 0;
  double messagesPerSecond = 0;  // messages accepted for delivery
  double busy = 0;               // seconds the app spent on the shard's message turns, per second
  std::size_t entities = 0;      // active now
};

}  // namespace kshard::sidecar
