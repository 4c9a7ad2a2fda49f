// Leadership: whether this operator replica is the Shard Manager right now.
//
// Only the leader rebalances and answers register/unregister/notify-unhealthy (DESIGN.md,
// "Operator high availability"). The controller asks isLeader() before every step that acts on
// pods or on the store, so a replica that lost its lease stops at the next step (epoch rule 7);
// the elector also tells the ShardManager when leadership starts and stops.
#pragma once

#include <string>

namespace kshard::manager {

class Leadership {
 public:
  virtual ~Leadership() = default;
  // True while this replica holds the lease and renewed it within the renew deadline.
  virtual bool isLeader() const = 0;
  // The lease holder's identity (its pod name), empty when unknown or nobody holds it.
  virtual std::string holder() const = 0;
};

}  // namespace kshard::manager
