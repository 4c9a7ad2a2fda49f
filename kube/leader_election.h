// LeaderElector: one leader among candidates sharing a coordination.k8s.io/v1 Lease, with
// client-go's leaderelection semantics and defaults (lease 15 s, renew deadline 10 s, retry 2 s).
//
//   - A candidate tries every retryPeriod (jittered by up to 1.2x). It takes the lease when the
//     lease does not exist, has no holder, or its record has not changed for the record's
//     leaseDurationSeconds as measured on the candidate's own clock since it first saw that
//     record (client-go's observedTime: clocks of different machines are never compared).
//   - Every write carries the resourceVersion read, so of two candidates racing only one wins.
//   - The leader renews every retryPeriod. When no renewal has succeeded within renewDeadline of
//     the renew cycle's start, or a read shows another holder, it stops leading: onStoppedLeading
//     runs, and then it campaigns again as a candidate. Since renewDeadline + retryPeriod is less
//     than leaseDuration, a leader that cannot renew gives up before anyone may take over.
//   - stop() while leading calls onStoppedLeading first, then (releaseOnCancel) writes an empty
//     holder with leaseDurationSeconds 1, as client-go's ReleaseOnCancel, so a successor takes
//     over within a retry period instead of a lease duration. onStoppedLeading must have stopped
//     all leader work when it returns.
//
//   kube::LeaderElector elector(api, scheduler, random, logger,
//       {.leaseNamespace = "kshard-system", .leaseName = "kshard-operator", .identity = podName},
//       {.onStartedLeading = [&] { rebalancer.start(); },
//        .onStoppedLeading = [&] { rebalancer.stop(); },
//        .onNewLeader = [&](const std::string& id) { manager.setLeader(id); }});
//   if (Status s = elector.start(); !s.ok()) ...
//
// Time comes from the Scheduler (its clock): tests drive elections with a ManualScheduler.
// Callbacks run one at a time, on a scheduler or transport thread, and must not block. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "kube/client.h"
#include "kube/lease_lock.h"
#include "kube/lifetime.h"

namespace kshard::kube {

struct LeaderElectionConfig {
  std::string leaseNamespace;
  std::string leaseName;
  std::string identity;  // unique per candidate: the pod name
  Duration leaseDuration = std::chrono::seconds(15);
  Duration renewDeadline = std::chrono::seconds(10);
  Duration retryPeriod = std::chrono::seconds(2);
  bool releaseOnCancel = true;
  std::chrono::milliseconds requestTimeout{std::chrono::seconds(5)};
};

// client-go's checks: leaseDuration > renewDeadline > 1.2 x retryPeriod, all positive, and a
// lease name and identity.
Status validateLeaderElectionConfig(const LeaderElectionConfig& config);

struct LeaderCallbacks {
  std::function<void()> onStartedLeading;
  std::function<void()> onStoppedLeading;
  // The holder seen in the lease changed (also to this candidate; "" when released).
  std::function<void(const std::string& identity)> onNewLeader;
  // This candidate acquired or renewed the lease; `attemptStart` is when that write began, so
  // the lease was renewed no earlier (what a bound on "until when may the old leader still act"
  // needs: nobody else can acquire it before `attemptStart` + leaseDuration).
  std::function<void(SteadyTime attemptStart)> onRenewed;
};

class LeaderElector {
 public:
  LeaderElector(Client& client, Scheduler& scheduler, Random& random, Logger logger,
                LeaderElectionConfig config, LeaderCallbacks callbacks);
  // Stops campaigning without releasing; waits for a running step. Prefer stop(done) first.
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Validates the config and starts campaigning (the first attempt runs at once).
  Status start();
  // Stops campaigning. When leading, calls onStoppedLeading and releases the lease
  // (releaseOnCancel); `done` runs once that is over (immediately when there is nothing to do).
  void stop(std::function<void()> done = nullptr);

  bool isLeader() const;
  // The holder of the lease as last observed ("" when none or not yet read).
  std::string leader() const;
  // The Lease's resourceVersion as this candidate last read or wrote it.
  std::string leaseResourceVersion() const;

 private:
  enum class State { kIdle, kCandidate, kLeader, kStopped };

  void scheduleTick(Duration delay);
  void tick();
  // client-go's tryAcquireOrRenew; `done(true)` when this candidate holds the lease.
  void tryAcquireOrRenew(std::function<void(bool)> done);
  // The callback for a create or update of the lease with `mine`: on success the record is
  // observed and `done(true)`; on failure `failure` is logged and `done(false)`.
  LeaseLock::DoneCallback onWritten(const char* failure, LeaderElectionRecord mine,
                                    std::function<void(bool)> done);
  void onAttempt(std::uint64_t generation, SteadyTime started, bool ok);
  void becomeLeader(SteadyTime renewedAt);
  void loseLeadership(const char* why);
  // Moves to `next` (not leading), disowning attempts and timers in flight.
  void leave(State next);
  void armDeadline(SteadyTime renewedAt);
  void setObserved(const LeaderElectionRecord& record);
  void reportTransition();
  void release(std::function<void()> done);
  bool observedIsMe() const { return observed_.holderIdentity == config_.identity; }

  Scheduler& scheduler_;
  Random& random_;
  Logger logger_;
  const LeaderElectionConfig config_;
  const LeaderCallbacks callbacks_;
  LeaseLock lock_;

  // Strand state: touched only under lifetime_ (guarded callbacks and run()).
  State state_ = State::kIdle;
  std::uint64_t generation_ = 0;  // bumped to disown attempts and timers in flight
  bool attemptInFlight_ = false;
  std::function<void()> releaseWhenIdle_;
  std::optional<Scheduler::TaskId> tick_;
  std::optional<Scheduler::TaskId> deadline_;
  LeaderElectionRecord observed_;
  SteadyTime observedTime_{};
  bool haveObserved_ = false;
  std::string reportedLeader_;

  // Read from any thread.
  mutable std::mutex viewMu_;
  bool isLeader_ = false;
  std::string leader_;

  Lifetime lifetime_;
};

}  // namespace kshard::kube
