// The Beast adapter's connection deadline (Watchdog in http/internal/beast_stream.h), on an event
// loop of its own: it fires once the latest deadline passed, never before it, and not at all once
// cleared or destroyed.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "http/internal/beast_stream.h"

namespace kshard::http::beast_detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct WatchdogTest : ::testing::Test {
  boost::asio::io_context io;
  std::optional<Clock::time_point> firedAt;

  // A watchdog on the test's loop that records when it fired.
  std::unique_ptr<Watchdog> watchdog() {
    auto w = std::make_unique<Watchdog>(io.get_executor());
    w->onExpire([this] { firedAt = Clock::now(); });
    return w;
  }

  // Runs the loop until the watchdog fired or `limit` passed.
  void runUntilFired(Clock::duration limit) {
    const auto giveUp = Clock::now() + limit;
    while (!firedAt && Clock::now() < giveUp) {
      io.restart();
      io.run_for(10ms);
    }
  }
};

TEST_F(WatchdogTest, FiresOnceTheDeadlinePassed) {
  const auto w = watchdog();
  const auto start = Clock::now();
  w->expiresAfter(20ms);
  runUntilFired(10s);
  ASSERT_TRUE(firedAt) << "the watchdog did not fire within 10 s of a 20 ms deadline";
  EXPECT_GE(*firedAt - start, 20ms);
}

TEST_F(WatchdogTest, AMovedDeadlineIsTheOneThatCounts) {
  const auto w = watchdog();
  w->expiresAfter(30ms);
  // Before the first deadline, move it 150 ms further: the timer fires at 30 ms and waits on.
  boost::asio::steady_timer later(io, 20ms);
  Clock::time_point moved{};
  later.async_wait([&](const boost::system::error_code&) {
    moved = Clock::now() + 150ms;
    w->expiresAt(moved);
  });
  runUntilFired(10s);
  ASSERT_TRUE(firedAt) << "the watchdog did not fire within 10 s";
  EXPECT_GE(*firedAt, moved) << "it fired at the first deadline, not the moved one";
}

TEST_F(WatchdogTest, AnEarlierDeadlineReplacesALaterOne) {
  const auto w = watchdog();
  w->expiresAfter(1h);
  w->expiresAfter(20ms);
  runUntilFired(10s);
  EXPECT_TRUE(firedAt) << "a deadline 20 ms away, set after one an hour away, did not fire in 10 s";
}

TEST_F(WatchdogTest, NeverFiresWhenCleared) {
  const auto w = watchdog();
  w->expiresAfter(20ms);
  w->never();
  runUntilFired(200ms);
  EXPECT_FALSE(firedAt) << "the watchdog fired after its deadline was cleared";
}

TEST_F(WatchdogTest, NeverFiresOnceDestroyed) {
  {
    const auto w = watchdog();
    w->expiresAfter(1ms);
  }
  runUntilFired(200ms);
  EXPECT_FALSE(firedAt) << "a destroyed watchdog called its callback";
}

}  // namespace
}  // namespace kshard::http::beast_detail
