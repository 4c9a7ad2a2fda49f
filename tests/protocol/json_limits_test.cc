#include "protocol/json_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace kshard::protocol {
namespace {

TEST(CheckJsonDepthTest, DocumentsUpToTheLimitPass) {
  EXPECT_TRUE(checkJsonDepth("").ok());
  EXPECT_TRUE(checkJsonDepth("17").ok());
  EXPECT_TRUE(checkJsonDepth(R"({"a":[1,{"b":[]}],"c":{}})", 4).ok());
  EXPECT_TRUE(checkJsonDepth(std::string(64, '[') + std::string(64, ']')).ok());
}

TEST(CheckJsonDepthTest, OneLevelTooManyIsRefusedNamingWhere) {
  const Status s = checkJsonDepth(R"({"a":[1,{"b":[]}]})", 3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "the JSON nests deeper than 3 levels (at byte 13)");
}

TEST(CheckJsonDepthTest, BracketsInStringsDoNotCountAndEscapesAreFollowed) {
  EXPECT_TRUE(checkJsonDepth(R"(["[[[{{{", "\"[[[", "\\", {"k]]]": "x"}])", 2).ok());
  // An escaped backslash ends nothing: the quote after it closes the string.
  EXPECT_FALSE(checkJsonDepth(R"(["\\", [[]]])", 2).ok());
}

// The parser ends the input at a NUL byte (found by fuzz/json_depth_fuzz.cc): what follows is
// never parsed, so it does not count.
TEST(CheckJsonDepthTest, NothingAfterANulByteCounts) {
  const std::string text = std::string(R"(["x"])") + '\0' + "[[[[";
  EXPECT_TRUE(checkJsonDepth(text, 1).ok());
  EXPECT_FALSE(checkJsonDepth(std::string("[[") + '\0', 1).ok());
}

TEST(CheckJsonDepthTest, FourMebibytesOfOpeningBracketsStopAtTheLimit) {
  const std::string deep(4u << 20, '[');
  const Status s = checkJsonDepth(deep);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(at byte 64)"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kshard::protocol
