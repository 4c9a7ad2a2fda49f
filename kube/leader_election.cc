#include "kube/leader_election.h"

#include <utility>

#include "kube/backoff.h"

namespace kshard::kube {
namespace {

// client-go's JitterFactor for the acquire loop.
constexpr double kJitterFactor = 1.2;

long long toSeconds(Duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

}  // namespace

Status validateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.leaseName.empty() || c.leaseNamespace.empty()) {
    return invalidArgument("leader election: the lease namespace and name are required");
  }
  if (c.identity.empty()) return invalidArgument("leader election: an identity is required");
  if (c.retryPeriod <= Duration{0} || c.renewDeadline <= Duration{0} ||
      c.leaseDuration <= Duration{0}) {
    return invalidArgument("leader election: durations must be positive");
  }
  if (c.leaseDuration <= c.renewDeadline) {
    return invalidArgument("leader election: leaseDuration must be greater than renewDeadline");
  }
  if (static_cast<double>(c.renewDeadline.count()) <=
      kJitterFactor * static_cast<double>(c.retryPeriod.count())) {
    return invalidArgument("leader election: renewDeadline must be greater than 1.2 x retryPeriod");
  }
  if (toSeconds(c.leaseDuration) < 1) {
    return invalidArgument("leader election: leaseDuration must be at least 1 s");
  }
  return {};
}

LeaderElector::LeaderElector(Client& client, Scheduler& scheduler, Random& random, Logger logger,
                             LeaderElectionConfig config, LeaderCallbacks callbacks)
    : scheduler_(scheduler),
      random_(random),
      logger_(logger.withFields({{"lease", config.leaseNamespace + "/" + config.leaseName},
                                 {"identity", config.identity}})),
      config_(std::move(config)),
      callbacks_(std::move(callbacks)),
      lock_(client, config_.leaseNamespace, config_.leaseName, config_.requestTimeout) {}

LeaderElector::~LeaderElector() { lifetime_.end(); }

Status LeaderElector::start() {
  if (Status s = validateLeaderElectionConfig(config_); !s.ok()) return s;
  Status result;
  const bool ran = lifetime_.run([&] {
    if (state_ != State::kIdle) {
      result = failedPrecondition("leader election: already started");
      return;
    }
    state_ = State::kCandidate;
    scheduleTick(Duration{0});
  });
  if (!ran) return failedPrecondition("leader election: destroyed");
  return result;
}

void LeaderElector::stop(std::function<void()> done) {
  if (!done) done = [] {};
  lifetime_.run([&] {
    if (state_ == State::kIdle || state_ == State::kStopped) {
      state_ = State::kStopped;
      done();
      return;
    }
    const bool wasLeader = state_ == State::kLeader;
    leave(State::kStopped);
    // Leader work stops before the lease is released: once it is free, another candidate may
    // start leading within a retry period.
    if (wasLeader) {
      logger_.info("stopped leading", {{"reason", "stop"}});
      if (callbacks_.onStoppedLeading) callbacks_.onStoppedLeading();
    }
    if (!config_.releaseOnCancel) {
      done();
      return;
    }
    if (attemptInFlight_) {
      // Its outcome decides whether we hold the lease; release when it is known.
      releaseWhenIdle_ = std::move(done);
      return;
    }
    release(std::move(done));
  });
}

bool LeaderElector::isLeader() const {
  std::lock_guard lock(viewMu_);
  return isLeader_;
}

std::string LeaderElector::leader() const {
  std::lock_guard lock(viewMu_);
  return leader_;
}

std::string LeaderElector::leaseResourceVersion() const {
  std::string rv;
  lifetime_.run([&] { rv = lock_.resourceVersion(); });
  return rv;
}

void LeaderElector::scheduleTick(Duration delay) {
  if (tick_) scheduler_.cancel(*tick_);
  const std::uint64_t gen = generation_;
  tick_ = scheduler_.runAfter(delay, lifetime_.guard([this, gen] {
    if (gen != generation_) return;
    tick_.reset();
    tick();
  }));
}

void LeaderElector::tick() {
  if (state_ != State::kCandidate && state_ != State::kLeader) return;
  if (attemptInFlight_) {
    // An attempt disowned by a lost leadership is still out; try once it is back.
    scheduleTick(config_.retryPeriod);
    return;
  }
  attemptInFlight_ = true;
  const std::uint64_t gen = generation_;
  const SteadyTime started = scheduler_.clock().now();
  tryAcquireOrRenew([this, gen, started](bool ok) { onAttempt(gen, started, ok); });
}

void LeaderElector::setObserved(const LeaderElectionRecord& record) {
  observed_ = record;
  observedTime_ = scheduler_.clock().now();
  haveObserved_ = true;
  std::lock_guard lock(viewMu_);
  leader_ = record.holderIdentity;
}

void LeaderElector::tryAcquireOrRenew(std::function<void(bool)> done) {
  const WallTime wallNow = scheduler_.clock().wallNow();
  LeaderElectionRecord mine;
  mine.holderIdentity = config_.identity;
  mine.leaseDurationSeconds = static_cast<int>(toSeconds(config_.leaseDuration));
  mine.acquireTime = wallNow;
  mine.renewTime = wallNow;

  lock_.get(lifetime_.guard([this, mine, done](StatusOr<LeaderElectionRecord> got) mutable {
    if (!got.ok()) {
      if (got.status().code() != StatusCode::kNotFound) {
        logger_.warn("cannot read the lease", {{"error", got.status().toString()}});
        done(false);
        return;
      }
      lock_.create(mine, onWritten("cannot create the lease", mine, done));
      return;
    }
    const LeaderElectionRecord& current = *got;
    // observedTime restarts whenever the record changes: expiry is judged on our own clock,
    // never by comparing our time with the holder's renewTime.
    if (!haveObserved_ || current != observed_) setObserved(current);
    const SteadyTime now = scheduler_.clock().now();
    const bool held = !current.holderIdentity.empty() &&
                      current.holderIdentity != config_.identity &&
                      observedTime_ + std::chrono::seconds(current.leaseDurationSeconds) > now;
    if (held) {
      done(false);
      return;
    }
    if (current.holderIdentity == config_.identity) {
      mine.acquireTime = current.acquireTime;
      mine.leaseTransitions = current.leaseTransitions;
    } else {
      mine.leaseTransitions = current.leaseTransitions + 1;
    }
    lock_.update(mine, onWritten("cannot update the lease", mine, done));
  }));
}

LeaseLock::DoneCallback LeaderElector::onWritten(const char* failure, LeaderElectionRecord mine,
                                                 std::function<void(bool)> done) {
  return lifetime_.guard([this, failure, mine = std::move(mine), done = std::move(done)](Status s) {
    if (!s.ok()) {
      logger_.info(failure, {{"error", s.toString()}});
      done(false);
      return;
    }
    setObserved(mine);
    done(true);
  });
}

void LeaderElector::onAttempt(std::uint64_t generation, SteadyTime started, bool ok) {
  attemptInFlight_ = false;
  if (generation != generation_) {
    // Disowned by stop() or a lost leadership.
    if (releaseWhenIdle_) {
      auto done = std::move(releaseWhenIdle_);
      releaseWhenIdle_ = nullptr;
      release(std::move(done));
    }
    return;
  }
  reportTransition();
  if (state_ == State::kCandidate) {
    const Duration took = scheduler_.clock().now() - started;
    if (ok && took >= config_.renewDeadline) {
      // The lease is ours, but this attempt took longer than a renewal may: the renew deadline,
      // counted from when it started, would pass before the first renewal could succeed, and
      // leading would end a moment after it began (controllers would take over and abort).
      // Lead once a renewal confirms that the API answers in time.
      logger_.info(
          "acquired the lease slowly; confirming with a renewal before leading",
          {{"took_ms", std::chrono::duration_cast<std::chrono::milliseconds>(took).count()}});
      scheduleTick(Duration{0});
      return;
    }
    if (ok) {
      becomeLeader(started);
    } else {
      scheduleTick(jittered(config_.retryPeriod, kJitterFactor - 1.0, random_));
    }
    return;
  }
  if (state_ != State::kLeader) return;
  if (ok) {
    armDeadline(started);
    scheduleTick(config_.retryPeriod);
    if (callbacks_.onRenewed) callbacks_.onRenewed(started);
    return;
  }
  if (!observed_.holderIdentity.empty() && !observedIsMe()) {
    loseLeadership("another candidate holds the lease");
    return;
  }
  scheduleTick(config_.retryPeriod);  // the renew deadline decides when to give up
}

void LeaderElector::armDeadline(SteadyTime renewedAt) {
  if (deadline_) scheduler_.cancel(*deadline_);
  // The renew cycle after a success starts retryPeriod later and has renewDeadline to succeed.
  const SteadyTime due = renewedAt + config_.retryPeriod + config_.renewDeadline;
  const SteadyTime now = scheduler_.clock().now();
  const std::uint64_t gen = generation_;
  deadline_ = scheduler_.runAfter(due > now ? due - now : Duration{0}, lifetime_.guard([this, gen] {
    if (gen != generation_ || state_ != State::kLeader) return;
    deadline_.reset();
    loseLeadership("renew deadline passed");
  }));
}

void LeaderElector::becomeLeader(SteadyTime renewedAt) {
  state_ = State::kLeader;
  {
    std::lock_guard lock(viewMu_);
    isLeader_ = true;
  }
  logger_.info("started leading");
  armDeadline(renewedAt);
  scheduleTick(config_.retryPeriod);
  if (callbacks_.onRenewed) callbacks_.onRenewed(renewedAt);
  if (callbacks_.onStartedLeading) callbacks_.onStartedLeading();
}

void LeaderElector::leave(State next) {
  state_ = next;
  // Attempts and timers in flight belong to the state being left.
  ++generation_;
  if (tick_) scheduler_.cancel(*tick_);
  if (deadline_) scheduler_.cancel(*deadline_);
  tick_.reset();
  deadline_.reset();
  std::lock_guard lock(viewMu_);
  isLeader_ = false;
}

void LeaderElector::loseLeadership(const char* why) {
  leave(State::kCandidate);
  logger_.warn("stopped leading", {{"reason", why}});
  scheduleTick(config_.retryPeriod);
  if (callbacks_.onStoppedLeading) callbacks_.onStoppedLeading();
}

void LeaderElector::reportTransition() {
  if (observed_.holderIdentity == reportedLeader_) return;
  reportedLeader_ = observed_.holderIdentity;
  logger_.info("new leader observed", {{"leader", reportedLeader_}});
  if (callbacks_.onNewLeader) callbacks_.onNewLeader(reportedLeader_);
}

void LeaderElector::release(std::function<void()> done) {
  if (!haveObserved_ || !observedIsMe()) {
    done();
    return;
  }
  const WallTime wallNow = scheduler_.clock().wallNow();
  LeaderElectionRecord empty;
  empty.leaseDurationSeconds = 1;
  empty.acquireTime = wallNow;
  empty.renewTime = wallNow;
  empty.leaseTransitions = observed_.leaseTransitions;
  lock_.update(empty, lifetime_.guard([this, empty, done](Status s) {
    if (s.ok()) {
      setObserved(empty);
      logger_.info("released the lease");
    } else {
      logger_.warn("cannot release the lease", {{"error", s.toString()}});
    }
    done();
  }));
}

}  // namespace kshard::kube
