#include "sidecar/drainer.h"

namespace kshard::sidecar {
namespace {

// Time for the unregister's own calls (the persist, the replies) beyond the unassign it waits for.
constexpr Duration kUnregisterSlack = std::chrono::seconds(5);
// How often a drain that is still going says so.
constexpr Duration kProgressInterval = std::chrono::seconds(5);

}  // namespace

Drainer::Drainer(EntityRegistry& registry, ManagerClient& manager, RoutingTable& table,
                 Scheduler& scheduler, Logger logger)
    : registry_(registry),
      manager_(manager),
      table_(table),
      scheduler_(scheduler),
      log_(std::move(logger)) {}

bool Drainer::started() const {
  std::lock_guard lock(mu_);
  return started_;
}

bool Drainer::finished() const {
  std::lock_guard lock(mu_);
  return result_.has_value();
}

void Drainer::drain(std::function<void(Status)> done) {
  {
    std::lock_guard lock(mu_);
    if (result_) {
      Status r = *result_;
      done(r);
      return;
    }
    waiters_.push_back(std::move(done));
    if (started_) return;
    started_ = true;
    startedAt_ = scheduler_.clock().now();
    progressTask_ = scheduler_.runAfter(kProgressInterval, [this] { reportProgress(); });
  }
  const auto spec = table_.snapshot()->spec;
  log_.info("draining: unregistering",
            {{"active_entities", static_cast<std::uint64_t>(registry_.activeEntities())}});
  // The operator answers once it has unassigned the shards, which may take the handoff timeout.
  const Duration timeout = spec.handoffTimeout + spec.pingTimeout + kUnregisterSlack;
  manager_.unregisterPod(timeout, [this, spec](Status unregistered) {
    if (!unregistered.ok()) {
      log_.error(
          "unregister failed; the pod stays registered and its shards move only once it "
          "is gone",
          {{"error", unregistered.toString()}});
    }
    {
      std::lock_guard lock(mu_);
      unregistered_ = true;
    }
    registry_.drain(spec.handoffTimeout, [this, unregistered](bool complete) {
      if (!complete) {
        log_.error("entities still active after the handoff timeout",
                   {{"active_entities", static_cast<std::uint64_t>(registry_.activeEntities())}});
      }
      if (!unregistered.ok()) {
        finish(unregistered);
      } else if (!complete) {
        finish(deadlineExceeded("entities did not stop within the handoff timeout"));
      } else {
        log_.info("drained");
        finish(Status{});
      }
    });
  });
}

void Drainer::reportProgress() {
  std::string step;
  SteadyTime startedAt;
  {
    std::lock_guard lock(mu_);
    if (result_) return;
    step = unregistered_ ? "stopping entities" : "unregistering";
    startedAt = startedAt_;
  }
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::seconds>(scheduler_.clock().now() - startedAt);
  log_.info("draining",
            {{"step", step},
             {"active_entities", static_cast<std::uint64_t>(registry_.activeEntities())},
             {"elapsed_s", static_cast<std::int64_t>(elapsed.count())}});
  std::lock_guard lock(mu_);
  if (!result_)
    progressTask_ = scheduler_.runAfter(kProgressInterval, [this] { reportProgress(); });
}

void Drainer::finish(Status result) {
  std::vector<std::function<void(Status)>> waiters;
  Scheduler::TaskId progress = 0;
  {
    std::lock_guard lock(mu_);
    result_ = result;
    waiters.swap(waiters_);
    progress = progressTask_;
  }
  // A report running now finds the result and schedules no other.
  scheduler_.cancel(progress);
  for (auto& w : waiters) w(result);
}

}  // namespace kshard::sidecar
