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
// `fenceLead` before the lease runs out, the pod stops taking new messages and stops its
// entities, so that they are stopped when it has run out; messages already queued may still
// reach the app until then, none after.
//
// A value type, pure: time comes in. Disabled (always valid) until a duration is set.
#pragma once

#include <algorithm>
#include <chrono>

#include "base/clock.h"

namespace kshard::sidecar {

class OwnershipLease {
 public:
  // The lease's length (the ShardMap's spec.ownershipLease). The fence lead is a sixth of it,
  // at most 5 s: renewals come every third, so the pod fences itself only after about two and
  // a half renewals in a row were missed.
  void setDuration(Duration duration) {
    duration_ = duration;
    fenceLead_ = std::min<Duration>(duration / 6, std::chrono::seconds(5));
  }
  bool enabled() const { return duration_ > Duration::zero(); }
  Duration duration() const { return duration_; }

  // A confirmation whose request was sent at `sentAt`. True when it moved the end further out.
  bool renew(SteadyTime sentAt) {
    if (!enabled() || (renewed_ && sentAt + duration_ <= until_)) return false;
    until_ = sentAt + duration_;
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
};

}  // namespace kshard::sidecar
