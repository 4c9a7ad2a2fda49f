// RoutingTable: the sidecar's cached view of who owns each shard, for routing messages.
//
// It is filled from the watched ShardMap's status and read on every message, so reads take a
// snapshot (one shared_ptr copy under a mutex) and never wait for an update. A status with an
// older epoch than the one cached is ignored: the watch may deliver a late copy after a direct
// assign already taught the sidecar a newer state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/adaptive_mutex.h"
#include "base/clock.h"
#include "sharding/shard_map.h"

namespace kshard::sidecar {

struct RouteOwner {
  std::string pod;
  std::string uid;
  std::string address;      // peer API "ip:port"
  std::string incarnation;  // the sidecar process that registered it
};

// A pod the previous status listed and this one does not: it unregistered or was removed.
struct DepartedPod {
  std::string pod;
  std::string uid;
  SteadyTime at;  // when this sidecar saw the status without it
};

struct RoutingSnapshot {
  sharding::ShardMapSpec spec;  // timeouts the sidecar follows (sendTimeout, handoffTimeout, ...)
  std::int32_t shardCount = 0;
  std::int64_t epoch = 0;
  std::optional<sharding::ManagerRef> manager;
  std::vector<sharding::PodIndex> owners;  // owners[shard - 1]
  std::vector<RouteOwner> pods;            // indexed by PodIndex
  // Pods that left in the last few minutes, newest last. A drained pod still forwards the
  // requests its app had in flight, for up to sendTimeout after it unregistered.
  std::vector<DepartedPod> departed;
  // Pod name -> index in `pods` (names are unique in a valid status).
  std::map<std::string, sharding::PodIndex, std::less<>> podIndex;

  // The owner of `shard` (1..shardCount), or nothing while unassigned or out of range.
  const RouteOwner* ownerOf(std::int32_t shard) const;
  // The registered pod of that name, or nothing.
  const RouteOwner* podNamed(std::string_view name) const;
};

class RoutingTable {
 public:
  // `clock` times the departures (RoutingSnapshot::departed).
  explicit RoutingTable(const Clock& clock = SystemClock::instance()) : clock_(clock) {}

  // Replaces the cached view with `map`'s status unless the cached epoch is newer. Returns false
  // (and keeps the old view) when the status is inconsistent (a shard on two pods and the like),
  // or older.
  bool update(const sharding::ShardMap& map);

  // The current view; never null (empty before the first update).
  std::shared_ptr<const RoutingSnapshot> snapshot() const;

 private:
  const Clock& clock_;
  // Taken by every I/O thread for each message, for a pointer copy: spins before it sleeps.
  mutable AdaptiveMutex mu_;
  std::shared_ptr<const RoutingSnapshot> current_ = std::make_shared<RoutingSnapshot>();
};

}  // namespace kshard::sidecar
