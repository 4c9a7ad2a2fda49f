// Unregistration: the unregister calls of one ShardMapController, with the unregister hold
// (operator/unregister_hold.h). Epoch rule 5: the pod's shards are unassigned from the pod
// itself first; then the pod is removed and its shards unassigned in one write (at the epoch
// the unassign carried), the caller is answered, and an immediate round places the shards on
// the others. Without the pod's acknowledgement its shards are taken only if it is dead and
// surely runs nothing (PodHealthMonitor::removal).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/controller_operation.h"
#include "operator/unregister_hold.h"

namespace kshard::manager {

// The 409 UnregisterDeferred that tells pod `pod` to keep serving and ask again: `hold` lasts
// `remaining` more. Pure.
http::Response deferredResponse(const std::string& pod, const UnregisterHold& hold,
                                std::chrono::milliseconds remaining);
// The answer to an unregister whose unassign failed (`failure`): the pod keeps its shards. Pure.
http::Response unassignFailedResponse(const Status& failure);

class Unregistration : public ControllerOperation {
 public:
  using ControllerOperation::ControllerOperation;

  // An unregister call, on the strand of a replica that leads. Decided here, outside the
  // operation queue: a held pod must not keep the registrations it waits for from being written.
  void unregisterPod(const protocol::UnregisterRequest& request, const Reply& reply);
  // A pod labelled for this map changed: what starting() remembers may be stale.
  void podsChanged() { ++podsGeneration_; }

 private:
  // Holds the unregister or queues it; `observed` is the API's view of the pod.
  void proceed(const protocol::UnregisterRequest& request, const Reply& reply,
               const std::optional<PodInfo>& observed);
  // The 409 for this unregister, or nullopt to go ahead.
  std::optional<http::Response> deferral(const protocol::UnregisterRequest& request,
                                         const std::optional<PodInfo>& observed);
  // startingVersions() of the informer's pods, recomputed only when a pod or the status changed.
  const std::vector<std::string>& starting();
  void enqueue(const protocol::UnregisterRequest& request, const Reply& reply, int attempt,
               bool front);
  void run(const protocol::UnregisterRequest& request, const Reply& reply, int attempt,
           std::function<void()> done);
  void release(const protocol::UnregisterRequest& request, const Reply& reply, int attempt,
               std::function<void()> done);
  void releaseFailed(const protocol::UnregisterRequest& request, const Reply& reply, int attempt,
                     const sharding::RegisteredPod& pod, const Status& failure,
                     std::function<void()> done);
  // Removes the pod from the map and persists; answers the caller.
  void removeAndPersist(const protocol::UnregisterRequest& request, const Reply& reply, int attempt,
                        const sharding::RegisteredPod& pod, std::function<void()> done);

  // Pods whose unregister is being held, with when the first deferral was answered.
  std::map<std::string, SteadyTime> held_;
  // The memo behind starting(): valid for podsGeneration_ and the status' resourceVersion.
  std::uint64_t podsGeneration_ = 0;
  struct StartingMemo {
    std::uint64_t podsGeneration = 0;
    std::string resourceVersion;
    std::vector<std::string> versions;
  };
  std::optional<StartingMemo> startingMemo_;
};

}  // namespace kshard::manager
