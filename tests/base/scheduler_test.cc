#include "base/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <vector>

namespace kshard {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ManualSchedulerTest, RunsTasksInDueOrderWhenTimeAdvances) {
  ManualScheduler s;
  std::vector<int> ran;
  s.runAfter(seconds(2), [&] { ran.push_back(2); });
  s.runAfter(seconds(1), [&] { ran.push_back(1); });
  s.runAfter(seconds(1), [&] { ran.push_back(11); });
  EXPECT_EQ(s.pending(), 3u);
  s.advance(milliseconds(999));
  EXPECT_TRUE(ran.empty());
  s.advance(milliseconds(1));
  EXPECT_EQ(ran, (std::vector<int>{1, 11}));
  s.advance(seconds(5));
  EXPECT_EQ(ran, (std::vector<int>{1, 11, 2}));
  EXPECT_EQ(s.clock().now().time_since_epoch(), seconds(6));
}

TEST(ManualSchedulerTest, TaskSeesItsDueTimeAndMayScheduleMore) {
  ManualScheduler s;
  std::vector<Duration> at;
  std::function<void()> tick = [&] {
    at.push_back(s.clock().now().time_since_epoch());
    if (at.size() < 3) s.runAfter(seconds(1), tick);
  };
  s.runAfter(seconds(1), tick);
  s.advance(seconds(10));
  EXPECT_EQ(at, (std::vector<Duration>{seconds(1), seconds(2), seconds(3)}));
}

TEST(ManualSchedulerTest, CancelledTaskNeverRuns) {
  ManualScheduler s;
  bool ran = false;
  auto id = s.runAfter(seconds(1), [&] { ran = true; });
  EXPECT_TRUE(s.cancel(id));
  EXPECT_FALSE(s.cancel(id));
  s.advance(seconds(2));
  EXPECT_FALSE(ran);
  EXPECT_EQ(s.pending(), 0u);
}

TEST(ThreadSchedulerTest, RunsTaskOnItsThread) {
  ThreadScheduler s;
  std::mutex mu;
  std::condition_variable cv;
  bool ran = false;
  s.runAfter(milliseconds(1), [&] {
    std::lock_guard lock(mu);
    ran = true;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return ran; }))
      << "the scheduled task did not run within 10 s";
}

// The thread sleeps until its earliest task; a task scheduled later but due sooner must wake it.
TEST(ThreadSchedulerTest, AnEarlierTaskScheduledLaterRunsFirst) {
  ThreadScheduler s;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> order;
  auto record = [&](int n) {
    std::lock_guard lock(mu);
    order.push_back(n);
    cv.notify_all();
  };
  s.runAfter(seconds(3600), [&] { record(1); });
  s.runAfter(seconds(1800), [&] { record(2); });
  s.runAfter(milliseconds(1), [&] { record(3); });
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return !order.empty(); }))
      << "a task due in 1 ms, scheduled after tasks due in 30 and 60 min, did not run within 10 s";
  EXPECT_EQ(order, std::vector<int>{3});
}

}  // namespace
}  // namespace kshard
