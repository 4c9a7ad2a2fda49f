#include "operator/ownership_leases.h"

#include <algorithm>

namespace kshard::manager {

bool mayConfirmOwnership(const Leadership& leadership, SteadyTime now, Duration grace) {
  if (leadership.isLeader()) return true;
  const auto renewed = leadership.lastRenewal();
  return renewed.has_value() && !leadership.deposed() && now < *renewed + grace;
}

SteadyTime leaseSurelyOver(const VanishedPodLease& facts) {
  SteadyTime latest = std::max(facts.termStart + graceWithoutApi(facts.lease),
                               facts.vanishedSeen + kApiConfirmationLag);
  if (facts.lastGrant) latest = std::max(latest, *facts.lastGrant);
  return latest + facts.lease + leaseMargin(facts.lease);
}

}  // namespace kshard::manager
