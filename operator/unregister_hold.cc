#include "operator/unregister_hold.h"

#include <algorithm>
#include <set>

#include "sharding/version.h"

namespace kshard::manager {

std::vector<std::string> startingVersions(const sharding::ShardMap& map,
                                          const std::vector<PodInfo>& podsOfMap) {
  std::set<std::pair<std::string_view, std::string_view>> registered;
  for (const sharding::RegisteredPod& p : map.status.pods) registered.emplace(p.name, p.uid);
  std::vector<std::string> out;
  for (const PodInfo& pod : podsOfMap) {
    if (pod.terminating || pod.phase == "Failed" || pod.phase == "Succeeded") continue;
    if (registered.count({pod.name, pod.uid})) continue;
    auto version = pod.labels.find(map.spec.versionLabel);
    out.push_back(version == pod.labels.end() ? std::string() : version->second);
  }
  return out;
}

std::optional<UnregisterHold> unregisterHold(const sharding::ShardMap& map,
                                             const sharding::RegisteredPod& leaving,
                                             const std::optional<PodInfo>& observed,
                                             const std::vector<std::string>& starting,
                                             Duration maxHold, WallTime now) {
  // Only a pod being deleted has a deadline to hold against; and only that same pod.
  if (maxHold <= Duration::zero() || !observed || observed->uid != leaving.uid ||
      !observed->terminating || !observed->deletionTimestamp) {
    return std::nullopt;
  }
  const WallTime killedAt = *observed->deletionTimestamp;
  WallTime until = killedAt - map.spec.handoffTimeout - map.spec.pingTimeout - kHoldMargin;
  std::optional<WallTime> deletedAt;
  if (observed->deletionGracePeriodSeconds) {
    deletedAt = killedAt - std::chrono::seconds(*observed->deletionGracePeriodSeconds);
    until = std::min(until, *deletedAt + maxHold);
  } else {
    until = std::min(until, now + maxHold);
  }
  if (until <= now) return std::nullopt;

  UnregisterHold hold;
  hold.until = until;
  for (const std::string& version : starting) {
    if (sharding::compareVersions(version, leaving.version) <= 0) continue;
    ++hold.startingPods;
    if (hold.version.empty() || sharding::compareVersions(version, hold.version) > 0) {
      hold.version = version;
    }
  }
  if (hold.startingPods == 0) {
    // The ReplicaSet creates a replacement at about the moment it deletes an old pod, and the
    // informer may not show it yet (the sidecar's unregister can come within milliseconds of
    // the delete): until kReplacementSettle after the delete, no starting pod proves nothing.
    if (!deletedAt || now >= *deletedAt + kReplacementSettle) return std::nullopt;
    hold.until = std::min(until, *deletedAt + kReplacementSettle);
  }
  return hold;
}

}  // namespace kshard::manager
