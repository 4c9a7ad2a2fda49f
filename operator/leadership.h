// Leadership: whether this operator replica is the Shard Manager right now.
//
// Only the leader rebalances and answers register/unregister/notify-unhealthy (DESIGN.md,
// "Operator high availability"). The controller asks isLeader() before every step that acts on
// pods or on the store, so a replica that lost its lease stops at the next step (epoch rule 7);
// the elector also tells the ShardManager when leadership starts and stops.
#pragma once

#include <optional>
#include <string>

#include "base/clock.h"

namespace kshard::manager {

class Leadership {
 public:
  virtual ~Leadership() = default;
  // True while this replica holds the lease and renewed it within the renew deadline.
  virtual bool isLeader() const = 0;
  // The lease holder's identity (its pod name), empty when unknown or nobody holds it.
  virtual std::string holder() const = 0;
  // When this replica last acquired or renewed the lease (the write's start), if ever.
  virtual std::optional<SteadyTime> lastRenewal() const = 0;
  // Another replica was seen holding the lease after this replica's last renewal.
  virtual bool deposed() const = 0;
};

// Whether this replica may still confirm pods' ownership leases (the renew call of the manager
// API): for `grace` after its last renewal of the Lease, unless another replica has taken it
// (whether or not the leading flag is still set: it may be stale after a freeze). The grace keeps pods serving through an API server outage, during which
// no replica can lead (nor move a shard); a replica that takes the Lease over counts it in its
// wait before it moves the shards of a pod that vanished (docs/reliability.md).
bool mayConfirmOwnership(const Leadership& leadership, SteadyTime now, Duration grace);

}  // namespace kshard::manager
