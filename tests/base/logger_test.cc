#include "base/logger.h"

#include <gtest/gtest.h>

#include <vector>

namespace kshard {
namespace {

struct Capture {
  std::vector<std::string> lines;
  LogSink sink() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
};

TEST(LoggerTest, WritesOneJsonObjectPerLineWithFields) {
  Capture cap;
  ManualClock clock(WallTime{} + std::chrono::seconds(1795343462) + std::chrono::milliseconds(114));
  Logger log("operator", LogLevel::kInfo, cap.sink(), clock);
  log.info("shards assigned", {{"pod", "counter-1"}, {"count", 12}, {"ok", true}});
  ASSERT_EQ(cap.lines.size(), 1u);
  EXPECT_EQ(cap.lines[0],
            "{\"ts\":\"2026-11-22T10:31:02.114Z\",\"level\":\"info\",\"component\":\"operator\","
            "\"msg\":\"shards assigned\",\"pod\":\"counter-1\",\"count\":12,\"ok\":true}\n");
}

TEST(LoggerTest, FiltersBelowLevelAndChildAddsFields) {
  Capture cap;
  Logger log("sidecar", LogLevel::kWarn, cap.sink());
  log.info("dropped");
  Logger child = log.withFields({{"shard_map", "demo/counter"}});
  child.warn("slow");
  ASSERT_EQ(cap.lines.size(), 1u);
  EXPECT_NE(cap.lines[0].find("\"msg\":\"slow\",\"shard_map\":\"demo/counter\""),
            std::string::npos);
}

TEST(LoggerTest, EscapesControlCharactersAndInvalidUtf8) {
  std::string out;
  Logger::appendJsonEscaped(out, "a\"b\\c\n\x01\xFF\xC3\xA9");
  EXPECT_EQ(out, "a\\\"b\\\\c\\n\\u0001\\ufffd\xC3\xA9");
}

TEST(LoggerTest, ParsesLevelNames) {
  LogLevel l{};
  EXPECT_TRUE(parseLogLevel("debug", l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_TRUE(parseLogLevel("warning", l));
  EXPECT_EQ(l, LogLevel::kWarn);
  EXPECT_FALSE(parseLogLevel("loud", l));
}

}  // namespace
}  // namespace kshard
