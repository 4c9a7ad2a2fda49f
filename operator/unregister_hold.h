// The unregister hold: a terminating pod keeps its shards, and keeps serving them, while pods of a
// newer version are starting, so that its shards move once, straight to a new pod.
//
// In a rolling update the Deployment deletes old pods before the new ones are ready (its default
// maxUnavailable is 25%). Were an old pod's unregister done at once, the only pods that could take
// its shards would be other old pods, and those shards would move again when their new owners are
// deleted in turn: 1.4 moves per shard at 1,000 pods (docs/benchmarks.md). So the manager answers
// the unregister of a terminating pod with "retry later" (409 UnregisterDeferred) while
//   - some pod of the ShardMap that is alive, not terminating and not registered yet runs a
//     version newer than the leaving pod's, and
//   - there is time left: the hold ends at the latest at the delete's time plus the operator's
//     `--max-unregister-hold`, and early enough for the handoff to finish before the kubelet
//     kills the pod (deletionTimestamp - handoffTimeout - pingTimeout - kHoldMargin).
// Nothing else changes: a held pod takes no new shards (it is terminating), and its sidecar asks
// again after the Retry-After the answer carries. The ReplicaSet creates the replacement at about
// the moment it deletes the old pod, and the informer may not show it yet when the unregister
// comes (within milliseconds of the delete, end to end); so every deleted pod is held until
// kReplacementSettle after its delete, even with no newer pod in sight. Beyond that, a
// scale-down (no newer version), a pod not being deleted (a drain asked by hand), or a
// StatefulSet update (the new pod is created only once the old one is gone) is not held.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "operator/pod_directory.h"
#include "sharding/shard_map.h"

namespace kshard::manager {

// Kept between the end of a hold and the kubelet's deadline, on top of the handoff's own time.
inline constexpr Duration kHoldMargin = std::chrono::seconds(2);
// How long after its delete a pod is held even when no newer pod is starting yet: time for the
// replacements created with the delete to reach the informer.
inline constexpr Duration kReplacementSettle = std::chrono::seconds(5);
// How long a held sidecar waits before it asks again (the Retry-After of the answer).
inline constexpr Duration kHoldRetryAfter = std::chrono::seconds(1);

struct UnregisterHold {
  std::string version;            // the newest version among the starting pods
  std::int64_t startingPods = 0;  // pods of a newer version than the leaving pod's, not
                                  // registered; 0 in the first kReplacementSettle after the delete
  WallTime until;                 // the hold ends then at the latest
};

// The version labels (map.spec.versionLabel) of the pods that are starting: alive, not
// terminating, and not registered in map.status (by name and uid). `podsOfMap` is every pod
// labelled for the map (the informer's view). Pure.
std::vector<std::string> startingVersions(const sharding::ShardMap& map,
                                          const std::vector<PodInfo>& podsOfMap);

// nullopt: unregister now. `leaving` is the pod as registered, `observed` the API's view of it,
// `starting` what startingVersions gave. Pure.
std::optional<UnregisterHold> unregisterHold(const sharding::ShardMap& map,
                                             const sharding::RegisteredPod& leaving,
                                             const std::optional<PodInfo>& observed,
                                             const std::vector<std::string>& starting,
                                             Duration maxHold, WallTime now);

}  // namespace kshard::manager
