#include "base/scheduler.h"

namespace kshard {

Scheduler::TaskId TaskQueue::push(SteadyTime due, Scheduler::Task task) {
  const Scheduler::TaskId id = nextId_++;
  tasks_.emplace(Key{due, id}, std::move(task));
  dueById_.emplace(id, due);
  return id;
}

bool TaskQueue::erase(Scheduler::TaskId id) {
  auto it = dueById_.find(id);
  if (it == dueById_.end()) return false;
  tasks_.erase(Key{it->second, id});
  dueById_.erase(it);
  return true;
}

bool TaskQueue::popDue(SteadyTime now, Scheduler::Task& out) {
  if (tasks_.empty() || tasks_.begin()->first.first > now) return false;
  auto it = tasks_.begin();
  dueById_.erase(it->first.second);
  out = std::move(it->second);
  tasks_.erase(it);
  return true;
}

ThreadScheduler::ThreadScheduler(const Clock& clock) : clock_(clock), thread_([this] { loop(); }) {}

ThreadScheduler::~ThreadScheduler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Scheduler::TaskId ThreadScheduler::runAfter(Duration delay, Task task) {
  TaskId id;
  bool earliest;
  {
    std::lock_guard lock(mu_);
    const SteadyTime due = clock_.now() + delay;
    // The thread sleeps until the earliest task is due; a later task does not change that, so it
    // is woken only for a new earliest one. (Waking it for every task cost a context switch per
    // entity, whose idle timer is due minutes later.)
    earliest = queue_.empty() || due < queue_.nextDue();
    id = queue_.push(due, std::move(task));
  }
  if (earliest) cv_.notify_one();
  return id;
}

bool ThreadScheduler::cancel(TaskId id) {
  std::lock_guard lock(mu_);
  return queue_.erase(id);
}

void ThreadScheduler::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    Task task;
    if (queue_.popDue(clock_.now(), task)) {
      lock.unlock();
      task();
      lock.lock();
      continue;
    }
    if (queue_.empty()) {
      cv_.wait(lock);
    } else {
      // The queue is on the injected clock; wait on the real one for at most the remaining span.
      cv_.wait_for(lock, queue_.nextDue() - clock_.now());
    }
  }
}

Scheduler::TaskId ManualScheduler::runAfter(Duration delay, Task task) {
  std::lock_guard lock(mu_);
  return queue_.push(clock_.now() + delay, std::move(task));
}

bool ManualScheduler::cancel(TaskId id) {
  std::lock_guard lock(mu_);
  return queue_.erase(id);
}

std::size_t ManualScheduler::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void ManualScheduler::advance(Duration d) {
  const SteadyTime target = clock_.now() + d;
  for (;;) {
    Task task;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty() || queue_.nextDue() > target) break;
      const SteadyTime due = queue_.nextDue();
      if (due > clock_.now()) clock_.advance(due - clock_.now());
      queue_.popDue(clock_.now(), task);
    }
    task();
  }
  if (target > clock_.now()) clock_.advance(target - clock_.now());
}

}  // namespace kshard
