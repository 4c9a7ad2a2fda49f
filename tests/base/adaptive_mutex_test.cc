#include "base/adaptive_mutex.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace kshard {
namespace {

TEST(AdaptiveMutexTest, ExcludesOtherThreads) {
  AdaptiveMutex mu;
  // A read-modify-write in two steps, which loses increments unless the mutex excludes.
  long counter = 0;
  constexpr int kThreads = 4;
  constexpr int kRounds = 200000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard lock(mu);
        const long seen = counter;
        counter = seen + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, long{kThreads} * kRounds);
}

TEST(AdaptiveMutexTest, TryLockFailsWhileAnotherThreadHoldsIt) {
  AdaptiveMutex mu;
  std::unique_lock held(mu);
  bool got = true;
  std::thread([&] { got = mu.try_lock(); }).join();
  EXPECT_FALSE(got);
  held.unlock();
  std::thread([&] {
    got = mu.try_lock();
    if (got) mu.unlock();
  }).join();
  EXPECT_TRUE(got);
}

}  // namespace
}  // namespace kshard
