// The operator's side of the pods' ownership leases (the sidecar's side is
// sidecar/ownership_lease.h; docs/reliability.md explains both). Pure: time comes in.
//
// A sidecar delivers messages only while its lease runs; it renews it by a renew call to the
// manager, or by a request to the API server made with its pod's bound token (which the API
// server refuses once the pod object is gone). Each renewal counts from when the sidecar SENT
// its request, so the sidecar's lease never outlasts the grantor's view of it:
//   - a renew this replica granted at `t` (when it took the call) ends by t + lease;
//   - renewals by the API server end by (when the pod object vanished) + lease, plus the API
//     server's lag in refusing the pod's token (kApiConfirmationLag);
//   - renewals by a replica that led before this one end by (when that replica last renewed the
//     Lease) + grace + lease, which is before (this replica's term's start) + grace + lease,
//     since nobody acquires the Lease before its holder's last renewal + leaseDuration.
// The shards of a pod whose object vanished while Kubernetes did not report its containers
// terminated move only once all three have passed: only then is it sure that none of its
// entities runs.
#pragma once

#include <chrono>
#include <optional>

#include "base/clock.h"
#include "operator/leadership.h"

namespace kshard::manager {

// How long a replica keeps confirming leases after its last renewal of the Lease (it may not
// reach the API server; nobody else can lead then either): pods serve through an API server
// outage of about this plus one lease.
inline Duration graceWithoutApi(Duration lease) { return 4 * lease; }

// How long after a pod's object is gone the API server may still accept its token: it caches a
// successful token authentication for 10 s (kube-apiserver's default), and its pod cache lags.
inline constexpr Duration kApiConfirmationLag = std::chrono::seconds(12);

// The drift between the clocks that measure a lease on two machines, and scheduling delays.
inline Duration leaseMargin(Duration lease) {
  return std::chrono::seconds(2) + lease / 50;
}

struct VanishedPodLease {
  Duration lease{};                     // spec.ownershipLease
  std::optional<SteadyTime> lastGrant;  // the last renew this replica granted the pod
  SteadyTime termStart{};               // when this replica's current term began
  SteadyTime vanishedSeen{};            // when this replica first saw the pod object gone
};

// When the lease of a vanished pod has surely run out: from then on none of its entities runs.
SteadyTime leaseSurelyOver(const VanishedPodLease& facts);

}  // namespace kshard::manager
