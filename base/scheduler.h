// Scheduler: runs callbacks after a delay. Components that need timers (periodic rebalance rounds,
// retry backoff, passivation) take a Scheduler& so tests drive them with a ManualScheduler and no
// sleeps.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/unique_function.h"

namespace kshard {

class Scheduler {
 public:
  using TaskId = std::uint64_t;
  using Task = UniqueFunction<void()>;

  virtual ~Scheduler() = default;
  // Runs `task` once, no earlier than `delay` from now. Tasks due at the same time run in the order
  // they were scheduled. Never runs the task inline.
  virtual TaskId runAfter(Duration delay, Task task) = 0;
  // Cancels a task that has not started. Returns false when it already ran, runs, or never existed.
  virtual bool cancel(TaskId id) = 0;
  virtual const Clock& clock() const = 0;
};

// Shared bookkeeping: tasks ordered by (due time, sequence).
class TaskQueue {
 public:
  using Key = std::pair<SteadyTime, Scheduler::TaskId>;
  Scheduler::TaskId push(SteadyTime due, Scheduler::Task task);
  bool erase(Scheduler::TaskId id);
  bool empty() const { return tasks_.empty(); }
  std::size_t size() const { return tasks_.size(); }
  SteadyTime nextDue() const { return tasks_.begin()->first.first; }
  // Removes and returns the earliest task if it is due at `now`.
  bool popDue(SteadyTime now, Scheduler::Task& out);

 private:
  Scheduler::TaskId nextId_ = 1;
  std::map<Key, Scheduler::Task> tasks_;
  std::map<Scheduler::TaskId, SteadyTime> dueById_;
};

// Runs tasks on one background thread, on the system clock. Tasks must not block for long.
class ThreadScheduler final : public Scheduler {
 public:
  explicit ThreadScheduler(const Clock& clock = SystemClock::instance());
  ~ThreadScheduler() override;  // stops the thread; pending tasks are dropped
  ThreadScheduler(const ThreadScheduler&) = delete;
  ThreadScheduler& operator=(const ThreadScheduler&) = delete;

  TaskId runAfter(Duration delay, Task task) override;
  bool cancel(TaskId id) override;
  const Clock& clock() const override { return clock_; }

 private:
  void loop();

  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  TaskQueue queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// A scheduler on a ManualClock: time moves only in advance(), which runs every task that falls due,
// in order, on the calling thread (a task scheduled by a task runs too if it falls due in the
// span).
class ManualScheduler final : public Scheduler {
 public:
  ManualScheduler() = default;

  TaskId runAfter(Duration delay, Task task) override;
  bool cancel(TaskId id) override;
  const Clock& clock() const override { return clock_; }
  ManualClock& manualClock() { return clock_; }

  void advance(Duration d);
  // Runs the tasks due now without moving the clock.
  void runDue() { advance(Duration{0}); }
  // Tasks scheduled and not yet run or cancelled.
  std::size_t pending() const;

 private:
  ManualClock clock_;
  mutable std::mutex mu_;
  TaskQueue queue_;
};

}  // namespace kshard
