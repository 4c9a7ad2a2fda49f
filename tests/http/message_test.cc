#include "http/message.h"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kshard::http {
namespace {

TEST(MethodTest, NamesRoundTrip) {
  for (Method m : {Method::kGet, Method::kHead, Method::kPost, Method::kPut, Method::kPatch,
                   Method::kDelete, Method::kOptions, Method::kTrace}) {
    const auto parsed = parseMethod(methodName(m));
    ASSERT_TRUE(parsed.has_value()) << methodName(m);
    EXPECT_EQ(*parsed, m);
  }
}

TEST(MethodTest, ParseIsCaseSensitiveAndRejectsUnknown) {
  EXPECT_FALSE(parseMethod("get").has_value());
  EXPECT_FALSE(parseMethod("QUERY").has_value());
  EXPECT_FALSE(parseMethod("").has_value());
}

// The byte-at-a-time definition the word-at-a-time comparison must agree with.
bool referenceEqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; };
    if (lower(static_cast<unsigned char>(a[i])) != lower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

TEST(EqualsIgnoreCaseTest, AgreesWithTheByteDefinitionForEveryPairOfBytesAtEveryLength) {
  // Every pair of byte values, at the first, a middle and the last position of names of every
  // length from 1 to 20 (each way of splitting a name into words), the other bytes equal up to
  // case.
  for (std::size_t n = 1; n <= 20; ++n) {
    const std::string base = std::string("Kshard-Shard-Epoch-X").substr(0, n);
    std::string other = base;
    for (char& c : other) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
      std::string a = base;
      std::string b = other;
      for (int x = 0; x < 256; ++x) {
        for (int y = 0; y < 256; ++y) {
          a[at] = static_cast<char>(x);
          b[at] = static_cast<char>(y);
          if (equalsIgnoreCase(a, b) != referenceEqualsIgnoreCase(a, b)) {
            FAIL() << "length " << n << ", position " << at << ": bytes " << x << " and " << y;
          }
        }
      }
    }
  }
  EXPECT_TRUE(equalsIgnoreCase("", ""));
  EXPECT_FALSE(equalsIgnoreCase("Host", "Hosts"));
  EXPECT_TRUE(equalsIgnoreCase("TRANSFER-ENCODING", "transfer-encoding"));
  EXPECT_FALSE(equalsIgnoreCase("transfer-encoding", "transfer_encoding"));
  // '@' and '`', '[' and '{' differ by the case bit too, but are no letters.
  EXPECT_FALSE(equalsIgnoreCase("a@b[cdefgh", "a`b{cdefgh"));
}

TEST(HeadersTest, GetIsCaseInsensitiveAndReturnsFirst) {
  Headers h;
  h.add("Content-Type", "application/json");
  h.add("X-Tag", "a");
  h.add("x-tag", "b");
  EXPECT_EQ(h.get("content-type"), "application/json");
  EXPECT_EQ(h.get("X-TAG"), "a");
  EXPECT_FALSE(h.get("missing").has_value());
  EXPECT_EQ(h.size(), 3u);
}

TEST(HeadersTest, SetReplacesEveryFieldOfThatName) {
  Headers h;
  h.add("X-Tag", "a");
  h.add("x-tag", "b");
  h.add("Other", "c");
  h.set("X-TAG", "z");
  EXPECT_EQ(h.size(), 2u);
  EXPECT_EQ(h.get("x-tag"), "z");
  h.remove("other");
  EXPECT_FALSE(h.has("Other"));
}

TEST(HeadersTest, KeepsFieldsInOrderAsTheirWireForm) {
  Headers h;
  h.add("Content-Type", "application/json");
  h.add("X-Empty", "");
  h.add("X-Tag", "a: b\tc");
  EXPECT_EQ(h.wire(), "Content-Type: application/json\r\nX-Empty: \r\nX-Tag: a: b\tc\r\n");
  std::vector<std::pair<std::string, std::string>> fields;
  for (const auto& [name, value] : h) fields.emplace_back(name, value);
  EXPECT_EQ(fields,
            (std::vector<std::pair<std::string, std::string>>{
                {"Content-Type", "application/json"}, {"X-Empty", ""}, {"X-Tag", "a: b\tc"}}));
  EXPECT_EQ(h.get("x-empty"), "");
  EXPECT_EQ(h.get("x-tag"), "a: b\tc");
}

TEST(HeadersTest, GetMatchesWholeNamesOnly) {
  Headers h;
  h.add("A", "x:y");
  h.add("Ab", "b");
  h.add("Abc", ": c");
  h.add("X-Last", "");
  EXPECT_EQ(h.get("a"), "x:y");
  EXPECT_EQ(h.get("AB"), "b");
  EXPECT_EQ(h.get("abc"), ": c");
  EXPECT_EQ(h.get("x-last"), "");
  // Prefixes, extensions and text that spans a colon are no field's name.
  EXPECT_FALSE(h.get("A: x").has_value());
  EXPECT_FALSE(h.get("Abcd").has_value());
  EXPECT_FALSE(h.get("X-Last-").has_value());
  EXPECT_FALSE(h.get("").has_value());
  EXPECT_FALSE(Headers().get("A").has_value());
}

TEST(HeadersTest, DropsFieldsThatWouldBreakFraming) {
  Headers h;
  h.add("X-Evil", "a\r\nX-Injected: yes");
  h.add("X-Lf", std::string("a\nb"));
  h.add("X-Nul", std::string("a\0b", 3));
  h.add("Bad:Name", "v");
  h.add("Bad\rName", "v");
  h.add("", "v");
  h.add("X-Ok", "fine");
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.wire(), "X-Ok: fine\r\n");
  EXPECT_FALSE(isWritableField("X", "a\rb"));
  EXPECT_TRUE(isWritableField("X", "a\tb"));
}

TEST(HeadersTest, RemoveIfKeepsTheRestInOrder) {
  Headers h;
  for (const char* name : {"A", "Connection", "B", "Keep-Alive", "Connection", "C"}) {
    h.add(name, std::string("v-") + name);
  }
  h.removeIf([](std::string_view n) { return n == "Connection" || n == "Keep-Alive"; });
  EXPECT_EQ(h.size(), 3u);
  EXPECT_EQ(h.wire(), "A: v-A\r\nB: v-B\r\nC: v-C\r\n");
  h.removeIf([](std::string_view) { return true; });
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.begin(), h.end());
}

TEST(HeadersTest, RemoveIfCanJudgeByTheValueToo) {
  Headers h;
  h.add("A", "keep");
  h.add("B", "drop");
  h.add("C", "drop");
  h.add("D", "keep");
  std::vector<std::string> seen;
  h.removeIf([&seen](std::string_view name, std::string_view value) {
    seen.push_back(std::string(name) + "=" + std::string(value));
    return value == "drop";
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"A=keep", "B=drop", "C=drop", "D=keep"}));
  EXPECT_EQ(h.wire(), "A: keep\r\nD: keep\r\n");
}

TEST(HeadersTest, KnowsWhichOfTheAdaptersFieldsItHoldsThroughEveryChange) {
  Headers h;
  EXPECT_FALSE(h.holdsAny(0xff));
  h.add("HOST", "a");
  h.add("user-agent", "b");
  h.add("X-Other", "c");
  EXPECT_TRUE(h.holdsAny(Headers::kHost));
  EXPECT_TRUE(h.holdsAny(Headers::kUserAgent));
  EXPECT_FALSE(h.holdsAny(Headers::kConnection | Headers::kFraming));
  h.set("Content-Length", "3");
  h.add("Transfer-Encoding", "chunked");
  h.add("Connection", "close");
  h.add("Connection", "x");
  EXPECT_TRUE(h.holdsAny(Headers::kContentLength));
  EXPECT_TRUE(h.holdsAny(Headers::kTransferEncoding));

  // One of two Connection fields gone: still held; both gone: not.
  h.removeIf([](std::string_view n) { return n == "Connection"; });
  EXPECT_FALSE(h.holdsAny(Headers::kConnection));
  h.remove("content-length");
  EXPECT_FALSE(h.holdsAny(Headers::kContentLength));
  EXPECT_TRUE(h.holdsAny(Headers::kTransferEncoding | Headers::kHost | Headers::kUserAgent));

  const Headers copy = h;
  EXPECT_TRUE(copy.holdsAny(Headers::kTransferEncoding));
  Headers moved = std::move(h);
  EXPECT_TRUE(moved.holdsAny(Headers::kHost));
  EXPECT_FALSE(h.holdsAny(0xff));  // NOLINT(bugprone-use-after-move): moved-from is empty
  moved.appendWire("Connection: close\r\n", 1, Headers::kConnection);
  EXPECT_TRUE(moved.holdsAny(Headers::kConnection));
  moved.clear();
  EXPECT_FALSE(moved.holdsAny(0xff));
}

TEST(HeadersTest, AddingOrSettingFromItsOwnFieldsIsSafe) {
  Headers h;
  h.add("X-Long-Name-For-Growth", std::string(40, 'v'));
  for (int i = 0; i < 6; ++i) {
    // Views into h itself: every add may move the text they point into.
    const auto [name, value] = *h.begin();
    h.add(name, value);
  }
  EXPECT_EQ(h.size(), 7u);
  for (const auto& [name, value] : h) {
    EXPECT_EQ(name, "X-Long-Name-For-Growth");
    EXPECT_EQ(value, std::string(40, 'v'));
  }
  const std::string_view value = *h.get("x-long-name-for-growth");
  h.set("X-Copy", value);
  h.set("X-Long-Name-For-Growth", *h.get("x-copy"));
  EXPECT_EQ(h.size(), 2u);
  EXPECT_EQ(h.get("x-long-name-for-growth"), std::string(40, 'v'));
}

TEST(HeadersTest, CopiesAreIndependentAndMovedFromIsEmpty) {
  Headers a;
  a.add("X-A", "1");
  Headers b = a;
  b.add("X-B", "2");
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(b.size(), 2u);
  Headers c = std::move(b);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is the test
  EXPECT_EQ(b.begin(), b.end());
  a = std::move(c);
  EXPECT_EQ(a.get("x-b"), "2");
  EXPECT_TRUE(c.empty());  // NOLINT(bugprone-use-after-move)
}

TEST(HeadersTest, RemovingByANameFromItselfIsSafe) {
  Headers h;
  h.add("X-First", "1");
  h.add("X-Second", "2");
  h.add("x-first", "3");
  h.remove((*h.begin()).first);  // a view into h's own text
  EXPECT_EQ(h.wire(), "X-Second: 2\r\n");
}

TEST(RequestTest, ParamAndQueryParamLookups) {
  Request r;
  r.params = {{"type", "counter"}, {"id", "a/b"}};
  r.query["mode"] = "tell";
  EXPECT_EQ(r.param("id"), "a/b");
  EXPECT_EQ(r.param("type"), "counter");
  EXPECT_EQ(r.param("ty"), "");
  EXPECT_EQ(r.param("other"), "");
  EXPECT_EQ(r.queryParam("mode"), "tell");
  EXPECT_FALSE(r.queryParam("x").has_value());
}

TEST(ResponseTest, JsonSetsContentType) {
  const Response r = Response::json(201, R"({"a":1})");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.headers.get("Content-Type"), "application/json");
  EXPECT_EQ(r.body, R"({"a":1})");
}

TEST(ResponseTest, ErrorEscapesAnyMessage) {
  const std::string message = "quote \" backslash \\ newline \n tab \t control \x01 end";
  const Response r = Response::error(409, "EntityNotManagedByThisPod", message);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.headers.get("Content-Type"), "application/json");
  const auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "EntityNotManagedByThisPod");
  EXPECT_EQ(body["error"]["message"], message);
}

TEST(ResponseTest, ErrorWithInvalidUtf8StillYieldsJson) {
  const Response r = Response::error(400, "InvalidArgument", "bad \xff\xfe bytes");
  const auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["error"]["code"], "InvalidArgument");
}

TEST(PercentTest, DecodesEscapesAndKeepsPlusInPaths) {
  std::string out;
  ASSERT_TRUE(percentDecode("a%2Fb%20c+d", out));
  EXPECT_EQ(out, "a/b c+d");
  ASSERT_TRUE(percentDecode("a+b%2b", out, /*plusIsSpace=*/true));
  EXPECT_EQ(out, "a b+");
  ASSERT_TRUE(percentDecode("%e2%82%AC", out));
  EXPECT_EQ(out, "\xe2\x82\xac");
}

TEST(PercentTest, AnEmptyInputDecodesToNothing) {
  std::string out = "stale";
  ASSERT_TRUE(percentDecode(std::string_view(), out));
  EXPECT_EQ(out, "");
  ASSERT_TRUE(percentDecode(std::string_view(), out, /*plusIsSpace=*/true));
  EXPECT_EQ(out, "");
  EXPECT_EQ(percentEncode(std::string_view()), "");
}

TEST(PercentTest, RejectsMalformedEscapes) {
  std::string out;
  EXPECT_FALSE(percentDecode("%", out));
  EXPECT_FALSE(percentDecode("abc%2", out));
  EXPECT_FALSE(percentDecode("%zz", out));
  EXPECT_FALSE(percentDecode("%2g", out));
}

TEST(PercentTest, EncodeKeepsOnlyUnreserved) {
  EXPECT_EQ(percentEncode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percentEncode("a/b c?d#e%f+"), "a%2Fb%20c%3Fd%23e%25f%2B");
  EXPECT_EQ(percentEncode("\xe2\x82\xac"), "%E2%82%AC");
}

TEST(PercentTest, EncodeThenDecodeRoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  std::string back;
  ASSERT_TRUE(percentDecode(percentEncode(all), back));
  EXPECT_EQ(back, all);
}

}  // namespace
}  // namespace kshard::http
