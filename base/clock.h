// Clock: the one source of time for kshard's logic, injected so that rebalancing, retries and
// passivation run under a simulated clock in tests.
#pragma once

#include <chrono>
#include <mutex>

namespace kshard {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using Duration = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time, for deadlines and intervals.
  virtual SteadyTime now() const = 0;
  // Calendar time, for timestamps written to the API and logs.
  virtual WallTime wallNow() const = 0;
};

class SystemClock final : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
  WallTime wallNow() const override { return std::chrono::system_clock::now(); }
  // A process-wide instance for main() to inject; library code never reaches for it itself.
  static SystemClock& instance();
};

// A clock that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(WallTime wallStart = WallTime{} + std::chrono::hours(24 * 365 * 56))
      : wallStart_(wallStart) {}

  SteadyTime now() const override {
    std::lock_guard lock(mu_);
    return SteadyTime{} + elapsed_;
  }
  WallTime wallNow() const override {
    std::lock_guard lock(mu_);
    return wallStart_ + std::chrono::duration_cast<WallTime::duration>(elapsed_);
  }
  void advance(Duration d) {
    std::lock_guard lock(mu_);
    elapsed_ += d;
  }

 private:
  mutable std::mutex mu_;
  WallTime wallStart_;
  Duration elapsed_{0};
};

}  // namespace kshard
