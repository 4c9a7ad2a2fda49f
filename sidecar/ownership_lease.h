// OwnershipLease: until when this sidecar may deliver messages for the shards it owns without
// confirming that it still owns them (docs/reliability.md, "Ownership leases").
//
// The sidecar confirms its ownership itself, by requests it sends: a register or a renew the
// operator answered, or a request to the API server made with the pod's bound service-account
// token (which the API server refuses once the pod object is gone). Each confirmation counts
// from the moment its request was SENT, never from when the answer arrived: whoever granted it
// received the request later, so the grantor's own bound (the time it answered, plus the
// lease) is never earlier than the sidecar's. A request delayed in the network or answered to
// a frozen process therefore cannot extend the lease past what the grantor assumes.
//
// A quarter of the lease before it runs out, the pod stops taking new messages and stops its
// entities, so that they are stopped when it has run out; messages already queued may still
// reach the app until then. Nothing reaches the app after it (no message, no stop), and no call
// to the app is waited for past it (AppHost caps its timeouts): what the app does with a call
// it took before is its own, which the epoch it was given fences in its store.
//
// A value type, pure: time comes in. Disabled (always valid) until a duration is set.
#pragma once

#include <algorithm>
#include <chrono>

#include "base/clock.h"

namespace kshard::sidecar {

class OwnershipLease {
 public:
  // The lease's length (the ShardMap's spec.ownershipLease). The fence lead is a quarter of it:
  // renewals come every quarter, so the pod fences itself only after two renewals in a row were
  // missed, and has a quarter of the lease to stop its entities. A shorter lease (a ShardMap
  // recreated under running pods) takes effect at once.
  void setDuration(Duration duration) {
    duration_ = duration;
    fenceLead_ = duration / 4;
    if (renewed_ && lastSent_ + duration < until_) until_ = lastSent_ + duration;
  }
  bool enabled() const { return duration_ > Duration::zero(); }
  // Some confirmation was received (until() means something).
  bool confirmed() const { return renewed_; }
  Duration duration() const { return duration_; }

  // A confirmation whose request was sent at `sentAt`. True when it moved the end further out.
  bool renew(SteadyTime sentAt) {
    if (!enabled() || (renewed_ && sentAt + duration_ <= until_)) return false;
    until_ = sentAt + duration_;
    lastSent_ = sentAt;
    renewed_ = true;
    return true;
  }
  // Forgets every confirmation: nothing is delivered until the next one.
  void revoke() { renewed_ = false; }

  // When the lease runs out: nothing reaches the app from then on.
  SteadyTime until() const { return until_; }
  // When the pod stops taking messages and stops its entities.
  SteadyTime fenceAt() const { return until_ - fenceLead_; }
  // New messages are taken while the fence has not begun.
  bool acceptsAt(SteadyTime now) const { return !enabled() || (renewed_ && now < fenceAt()); }
  // Messages already taken reach the app while the lease runs.
  bool deliversAt(SteadyTime now) const { return !enabled() || (renewed_ && now < until_); }

 private:
  Duration duration_{};
  Duration fenceLead_{};
  bool renewed_ = false;
  SteadyTime until_{};
  SteadyTime lastSent_{};  // of the confirmation that set until_
};

}  // namespace kshard::sidecar
