#include "kube/watch.h"

#include <gtest/gtest.h>

#include "tests/kube/fake_transport.h"

namespace kshard::kube {
namespace {

using std::chrono::milliseconds;

const std::string kAdded =
    R"({"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}})";
const std::string kBookmark =
    R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"9"}}})";

TEST(WatchDecoderTest, DecodesOneEventPerLine) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  ASSERT_TRUE(d.feed(kAdded + "\n" + kBookmark + "\n", out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].type, WatchEventType::kAdded);
  EXPECT_EQ(out[0].object["metadata"]["name"], "a");
  EXPECT_EQ(out[1].type, WatchEventType::kBookmark);
  EXPECT_FALSE(d.partial());
}

TEST(WatchDecoderTest, ReassemblesALineSplitAtEveryPossibleByte) {
  const std::string stream = kAdded + "\n" + kBookmark + "\n";
  for (std::size_t cut = 1; cut < stream.size(); ++cut) {
    WatchDecoder d;
    std::vector<WatchEvent> out;
    ASSERT_TRUE(d.feed(stream.substr(0, cut), out).ok()) << cut;
    ASSERT_TRUE(d.feed(stream.substr(cut), out).ok()) << cut;
    ASSERT_EQ(out.size(), 2u) << cut;
    EXPECT_EQ(out[1].object["metadata"]["resourceVersion"], "9");
  }
}

TEST(WatchDecoderTest, ByteAtATimeAndCrLfAndBlankLines) {
  const std::string stream = kAdded + "\r\n\n" + kBookmark + "\n";
  WatchDecoder d;
  std::vector<WatchEvent> out;
  for (char c : stream) ASSERT_TRUE(d.feed(std::string(1, c), out).ok());
  EXPECT_EQ(out.size(), 2u);
}

TEST(WatchDecoderTest, ReportsAPartialLine) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  ASSERT_TRUE(d.feed(kAdded.substr(0, 20), out).ok());
  EXPECT_TRUE(d.partial());
  EXPECT_TRUE(out.empty());
}

TEST(WatchDecoderTest, RejectsMalformedEvents) {
  for (const std::string& bad : {std::string("not json\n"), std::string("[1,2]\n"),
                                 std::string(R"({"type":"ADDED"})") + "\n",
                                 std::string(R"({"type":"RENAMED","object":{}})") + "\n"}) {
    WatchDecoder d;
    std::vector<WatchEvent> out;
    EXPECT_EQ(d.feed(bad, out).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(WatchDecoderTest, RejectsAnOverlongLine) {
  WatchDecoder d(64);
  std::vector<WatchEvent> out;
  EXPECT_EQ(d.feed(std::string(100, 'x'), out).code(), StatusCode::kResourceExhausted);
}

TEST(WatchDecoderTest, ErrorEventCarriesItsStatus) {
  WatchDecoder d;
  std::vector<WatchEvent> out;
  ASSERT_TRUE(
      d.feed(
           R"json({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (50)"}})json"
           "\n",
           out)
          .ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(watchErrorStatus(out[0]).code(), StatusCode::kGone);
}

TEST(WatchStreamTest, StreamCutInsideAnEventIsUnavailableAfterTheCompleteOnes) {
  auto fake = std::make_shared<testing::FakeStream>(200, "");
  WatchStream w(testing::streamHandle(fake), "watch pods");
  fake->write(kAdded + "\n" + kBookmark.substr(0, 30));
  fake->end();
  auto first = w.next(milliseconds(100));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->type, WatchEventType::kAdded);
  auto second = w.next(milliseconds(100));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("middle of an event"), std::string::npos);
}

TEST(WatchStreamTest, CleanEndIsAnEmptyOptionalAndSilenceIsDeadlineExceeded) {
  auto fake = std::make_shared<testing::FakeStream>(200, "");
  WatchStream w(testing::streamHandle(fake), "watch pods");
  auto silent = w.next(milliseconds(1));
  EXPECT_EQ(silent.status().code(), StatusCode::kDeadlineExceeded);
  fake->write(kBookmark + "\n");
  fake->end();
  auto bookmark = w.next(milliseconds(100));
  ASSERT_TRUE(bookmark.ok() && bookmark->has_value());
  auto end = w.next(milliseconds(100));
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

}  // namespace
}  // namespace kshard::kube
