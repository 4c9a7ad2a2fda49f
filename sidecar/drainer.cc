#include "sidecar/drainer.h"

namespace kshard::sidecar {

Drainer::Drainer(EntityRegistry& registry, ManagerClient& manager, RoutingTable& table,
                 Logger logger)
    : registry_(registry), manager_(manager), table_(table), log_(std::move(logger)) {}

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
  }
  const auto spec = table_.snapshot()->spec;
  log_.info("draining",
            {{"active_entities", static_cast<std::uint64_t>(registry_.activeEntities())}});
  registry_.drain(spec.handoffTimeout, [this, spec](bool complete) {
    if (!complete) {
      log_.error("entities still active after the handoff timeout; not unregistering",
                 {{"active_entities", static_cast<std::uint64_t>(registry_.activeEntities())}});
      finish(deadlineExceeded(
          "entities did not stop within the handoff timeout; the pod stays registered and its "
          "shards move only once it is gone"));
      return;
    }
    log_.info("entities stopped, unregistering");
    manager_.unregisterPod(spec.handoffTimeout, [this](Status st) {
      if (!st.ok()) log_.error("unregister failed", {{"error", st.toString()}});
      finish(st);
    });
  });
}

void Drainer::finish(Status result) {
  std::vector<std::function<void(Status)>> waiters;
  {
    std::lock_guard lock(mu_);
    result_ = result;
    waiters.swap(waiters_);
  }
  for (auto& w : waiters) w(result);
}

}  // namespace kshard::sidecar
