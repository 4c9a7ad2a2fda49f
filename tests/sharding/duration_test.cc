#include "sharding/duration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>

#include "sharding/duration_option.h"

namespace kshard::sharding {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

Duration parsed(std::string_view text) {
  StatusOr<Duration> d = parseDuration(text);
  EXPECT_TRUE(d.ok()) << text << ": " << d.status().toString();
  return d.valueOr(Duration(-12345));
}

// Expected strings are Go's time.Duration.String output.
TEST(DurationTest, FormatsLikeGo) {
  EXPECT_EQ(formatDuration(Duration::zero()), "0s");
  EXPECT_EQ(formatDuration(nanoseconds(1)), "1ns");
  EXPECT_EQ(formatDuration(nanoseconds(1100)), "1.1\xC2\xB5s");
  EXPECT_EQ(formatDuration(microseconds(2200)), "2.2ms");
  EXPECT_EQ(formatDuration(milliseconds(500)), "500ms");
  EXPECT_EQ(formatDuration(seconds(20)), "20s");
  EXPECT_EQ(formatDuration(milliseconds(3300)), "3.3s");
  EXPECT_EQ(formatDuration(seconds(90)), "1m30s");
  EXPECT_EQ(formatDuration(minutes(2)), "2m0s");
  EXPECT_EQ(formatDuration(minutes(4) + seconds(5)), "4m5s");
  EXPECT_EQ(formatDuration(minutes(4) + milliseconds(5001)), "4m5.001s");
  EXPECT_EQ(formatDuration(hours(5) + minutes(6) + milliseconds(7001)), "5h6m7.001s");
  EXPECT_EQ(formatDuration(hours(1)), "1h0m0s");
  EXPECT_EQ(formatDuration(milliseconds(-1500)), "-1.5s");
  EXPECT_EQ(formatDuration(Duration(std::numeric_limits<std::int64_t>::max())),
            "2562047h47m16.854775807s");
  EXPECT_EQ(formatDuration(Duration(std::numeric_limits<std::int64_t>::min())),
            "-2562047h47m16.854775808s");
}

TEST(DurationTest, ParsesGoSyntax) {
  EXPECT_EQ(parsed("0"), Duration::zero());
  EXPECT_EQ(parsed("-0"), Duration::zero());
  EXPECT_EQ(parsed("20s"), seconds(20));
  EXPECT_EQ(parsed("1m30s"), seconds(90));
  EXPECT_EQ(parsed("500ms"), milliseconds(500));
  EXPECT_EQ(parsed("1h15m"), minutes(75));
  EXPECT_EQ(parsed("1.5s"), milliseconds(1500));
  EXPECT_EQ(parsed(".5m"), seconds(30));
  EXPECT_EQ(parsed("1.s"), seconds(1));
  EXPECT_EQ(parsed("+5s"), seconds(5));
  EXPECT_EQ(parsed("-5s"), seconds(-5));
  EXPECT_EQ(parsed("3ns"), nanoseconds(3));
  EXPECT_EQ(parsed("3us"), microseconds(3));
  EXPECT_EQ(parsed("3\xC2\xB5s"), microseconds(3));  // micro sign
  EXPECT_EQ(parsed("3\xCE\xBCs"), microseconds(3));  // Greek mu
  EXPECT_EQ(parsed("1h1m1s1ms1us1ns"), hours(1) + minutes(1) + seconds(1) + milliseconds(1) +
                                           microseconds(1) + nanoseconds(1));
  EXPECT_EQ(parsed("9223372036854775807ns"), Duration(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(parsed("-9223372036854775808ns"), Duration(std::numeric_limits<std::int64_t>::min()));
  EXPECT_EQ(parsed("0.3333333333333333333h"), nanoseconds(1200000000000));
}

TEST(DurationTest, RejectsMalformedDurationsWithTheReason) {
  EXPECT_EQ(parseDuration("").status().message(), "invalid duration \"\": empty");
  EXPECT_EQ(parseDuration("20").status().message(), "invalid duration \"20\": missing unit");
  EXPECT_EQ(parseDuration("20x").status().message(),
            "invalid duration \"20x\": unknown unit \"x\" (use ns, us, ms, s, m or h)");
  EXPECT_EQ(parseDuration("s").status().message(), "invalid duration \"s\": expected a number");
  EXPECT_EQ(parseDuration(".s").status().message(), "invalid duration \".s\": expected a number");
  EXPECT_EQ(parseDuration("1s ").status().message(),
            "invalid duration \"1s \": unknown unit \"s \" (use ns, us, ms, s, m or h)");
  EXPECT_EQ(parseDuration("-").status().message(), "invalid duration \"-\": empty");
  EXPECT_EQ(parseDuration("9223372036854775808ns").status().message(),
            "invalid duration \"9223372036854775808ns\": overflow");
  EXPECT_EQ(parseDuration("3000000h").status().message(),
            "invalid duration \"3000000h\": overflow");
  EXPECT_FALSE(parseDuration("99999999999999999999s").ok());
}

TEST(DurationTest, FormatThenParseIsTheIdentity) {
  for (std::int64_t n :
       {std::int64_t{0}, std::int64_t{1}, std::int64_t{999}, std::int64_t{1000},
        std::int64_t{1500000}, std::int64_t{59999999999}, std::int64_t{3600000000000},
        std::int64_t{-7200000000001}, std::numeric_limits<std::int64_t>::max(),
        std::numeric_limits<std::int64_t>::min()}) {
    EXPECT_EQ(parsed(formatDuration(Duration(n))), Duration(n)) << n;
  }
}

// sharding/duration_option.h: the default as Go writes it; below the minimum, its message.
TEST(DurationOptionTest, ShowsTheDefaultAndRefusesWhatIsTooShort) {
  Duration d = seconds(90);
  CustomOption o = durationOption(&d, minutes(1), "must be at least 1m");
  EXPECT_EQ(o.defaultText, "1m30s");
  EXPECT_EQ(o.set("59s").message(), "must be at least 1m");
  EXPECT_EQ(d, seconds(90));
  EXPECT_FALSE(o.set("1x").ok());
  EXPECT_TRUE(o.set("1m").ok());
  EXPECT_EQ(d, minutes(1));
  EXPECT_EQ(positiveDuration(&d).set("0s").message(), "must be greater than zero");
  EXPECT_TRUE(positiveDuration(&d).set("1ns").ok());
  EXPECT_EQ(nonNegativeDuration(&d).set("-1s").message(), "must not be negative");
  EXPECT_TRUE(nonNegativeDuration(&d).set("0s").ok());
  EXPECT_EQ(d, Duration::zero());
}

}  // namespace
}  // namespace kshard::sharding
