#include "operator/ownership_leases.h"

#include <algorithm>

namespace kshard::manager {

bool mayConfirmOwnership(const Leadership& leadership, SteadyTime now, Duration grace) {
  const auto renewed = leadership.lastRenewal();
  // The leading flag is cleared by the elector's own timer: a replica frozen past its term may
  // answer a renew before that timer runs. Its last renewal of the Lease bounds it either way.
  if (leadership.isLeader()) return !renewed.has_value() || now < *renewed + grace;
  return renewed.has_value() && !leadership.deposed() && now < *renewed + grace;
}

SteadyTime leaseSurelyOver(const VanishedPodLease& facts) {
  SteadyTime latest = std::max(facts.termStart + graceWithoutApi(facts.lease),
                               facts.vanishedSeen + kApiConfirmationLag);
  if (facts.lastGrant) latest = std::max(latest, *facts.lastGrant);
  return latest + facts.lease + leaseMargin(facts.lease);
}

}  // namespace kshard::manager
