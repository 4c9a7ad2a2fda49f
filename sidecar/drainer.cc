#include "sidecar/drainer.h"

namespace kshard::sidecar {
namespace {

// Time for the unregister's own calls (the persist, the replies) beyond the unassign it waits for.
constexpr Duration kUnregisterSlack = std::chrono::seconds(5);
// How often a drain that is still going says so.
constexpr Duration kProgressInterval = std::chrono::seconds(5);

}  // namespace

Drainer::Drainer(EntityRegistry& registry, ManagerClient& manager, RoutingTable& table,
                 Scheduler& scheduler, Logger logger, Options options)
    : registry_(registry),
      manager_(manager),
      table_(table),
      scheduler_(scheduler),
      log_(std::move(logger)),
      options_(std::move(options)) {}

Drainer::~Drainer() {
  Scheduler::TaskId progress;
  Scheduler::TaskId undo;
  {
    std::lock_guard lock(mu_);
    progress = progressTask_;
    undo = undoTask_;
  }
  scheduler_.cancel(progress);
  scheduler_.cancel(undo);
}

bool Drainer::started() const {
  std::lock_guard lock(mu_);
  return state_ != State::kServing;
}

bool Drainer::finished() const {
  std::lock_guard lock(mu_);
  return state_ == State::kDrained;
}

void Drainer::stopping() {
  std::lock_guard lock(mu_);
  stopping_ = true;
}

void Drainer::drain(std::function<void(Status)> done) {
  {
    std::lock_guard lock(mu_);
    if (state_ == State::kDrained) {
      Status r = *result_;
      done(r);
      return;
    }
    waiters_.push_back(std::move(done));
    if (state_ == State::kDraining) return;
    state_ = State::kDraining;
    ++cycle_;
    unregistered_ = false;
    result_.reset();
    startedAt_ = scheduler_.clock().now();
    progressTask_ = scheduler_.runAfter(kProgressInterval, [this] { reportProgress(); });
  }
  const auto spec = table_.snapshot()->spec;
  log_.info("draining: unregistering",
            {{"active_entities", static_cast<std::uint64_t>(registry_.activeEntities())}});
  // The operator answers once it has unassigned the shards, which may take the handoff timeout.
  const Duration timeout = spec.handoffTimeout + spec.pingTimeout + kUnregisterSlack;
  manager_.unregisterPod(timeout, [this](StatusOr<protocol::EpochResponse> answer) {
    unregistered(std::move(answer));
  });
}

void Drainer::unregistered(StatusOr<protocol::EpochResponse> answer) {
  const Status result = answer.status();
  if (!result.ok()) {
    log_.error(
        "unregister failed; the pod stays registered and its shards move only once it "
        "is gone",
        {{"error", result.toString()}});
  }
  {
    std::lock_guard lock(mu_);
    unregistered_ = true;
  }
  // Undone unless the operator said the pod is being deleted: without that, nothing says a
  // termination will follow.
  const bool mayUndo = !answer.ok() || answer->terminating != true;
  registry_.drain(table_.snapshot()->spec.handoffTimeout, [this, result, mayUndo](bool complete) {
    if (!complete) {
      log_.error("entities still active after the handoff timeout",
                 {{"active_entities", static_cast<std::uint64_t>(registry_.activeEntities())}});
    }
    if (!result.ok()) {
      finish(result, mayUndo);
    } else if (!complete) {
      finish(deadlineExceeded("entities did not stop within the handoff timeout"), mayUndo);
    } else {
      log_.info("drained");
      finish(Status{}, mayUndo);
    }
  });
}

void Drainer::reportProgress() {
  std::string step;
  SteadyTime startedAt;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::kDraining) return;
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
  if (state_ == State::kDraining) {
    progressTask_ = scheduler_.runAfter(kProgressInterval, [this] { reportProgress(); });
  }
}

void Drainer::finish(Status result, bool mayUndo) {
  std::vector<std::function<void(Status)>> waiters;
  Scheduler::TaskId progress = 0;
  std::uint64_t cycle = 0;
  {
    std::lock_guard lock(mu_);
    state_ = State::kDrained;
    result_ = result;
    waiters.swap(waiters_);
    progress = progressTask_;
    cycle = cycle_;
    mayUndo = mayUndo && !stopping_;
  }
  // A report running now finds the drain over and schedules no other.
  scheduler_.cancel(progress);
  if (mayUndo) {
    log_.info("the pod is not known to be terminating: serving again unless it stops",
              {{"in_s", std::chrono::duration_cast<std::chrono::seconds>(options_.linger).count()}});
    const Scheduler::TaskId task =
        scheduler_.runAfter(options_.linger, [this, cycle] { this->undo(cycle); });
    std::lock_guard lock(mu_);
    undoTask_ = task;
  }
  for (auto& w : waiters) w(result);
}

void Drainer::undo(std::uint64_t cycle) {
  {
    std::lock_guard lock(mu_);
    if (cycle != cycle_ || state_ != State::kDrained || stopping_) return;
    state_ = State::kServing;
  }
  log_.info("drain undone: the pod was not deleted; registering again");
  registry_.undrain();
  if (options_.onUndrain) options_.onUndrain();
}

}  // namespace kshard::sidecar
