// EndOfInstant: a task of `kshardctl simulate` that runs once after the events of the current
// simulated instant, however many of them ask for it.
//
// Controllers and shard managers react to everything that happened at one instant together:
// 500 pods that become ready at the same second meet one reconcile of the Deployment, one kshard
// round, one update of the ring. A request schedules the task at the current time on the
// Scheduler; events already due at this instant were scheduled earlier and run first (the
// Scheduler runs tasks due at the same time in the order they were scheduled).
#pragma once

#include <functional>
#include <utility>

#include "base/scheduler.h"

namespace kshard::tools {

class EndOfInstant {
 public:
  EndOfInstant(Scheduler& scheduler, std::function<void()> task)
      : scheduler_(scheduler), task_(std::move(task)) {}

  // Schedules the task unless it is already scheduled.
  void request() {
    if (pending_) return;
    pending_ = true;
    scheduler_.runAfter(Duration{0}, [this] {
      pending_ = false;
      task_();
    });
  }
  bool pending() const { return pending_; }

 private:
  Scheduler& scheduler_;
  std::function<void()> task_;
  bool pending_ = false;
};

}  // namespace kshard::tools
