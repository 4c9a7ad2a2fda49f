// Lifetime: lets callbacks that can outlive their owner (scheduler tasks, transport completions)
// run only while the owner is alive. Guarded callbacks of one Lifetime never run concurrently (a
// strand); end() waits for a running one and disables the rest, so an owner calls it first in
// stop() or its destructor and may then free what the callbacks use.
//
// Thread-safe. A guarded callback may call end() on its own Lifetime (the lock is recursive);
// guarded callbacks must not block on one another from different threads.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace kshard::kube {

class Lifetime {
 public:
  Lifetime() : state_(std::make_shared<State>()) {}
  ~Lifetime() { end(); }
  Lifetime(const Lifetime&) = delete;
  Lifetime& operator=(const Lifetime&) = delete;

  // Wraps `fn` (returning void) so that it runs under the strand, and not at all after end().
  template <typename F>
  auto guard(F fn) const {
    return [state = state_, fn = std::move(fn)](auto&&... args) mutable {
      std::lock_guard lock(state->mu);
      if (!state->alive) return;
      fn(std::forward<decltype(args)>(args)...);
    };
  }
  // Runs `fn` now under the strand, unless ended. Returns whether it ran.
  template <typename F>
  bool run(F&& fn) const {
    std::lock_guard lock(state_->mu);
    if (!state_->alive) return false;
    fn();
    return true;
  }
  void end() {
    std::lock_guard lock(state_->mu);
    state_->alive = false;
  }

 private:
  struct State {
    std::recursive_mutex mu;
    bool alive = true;
  };
  std::shared_ptr<State> state_;
};

}  // namespace kshard::kube
