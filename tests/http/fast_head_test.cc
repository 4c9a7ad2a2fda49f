// The data path's fast head parser (http/internal/fast_head.h) and the MessageParser that falls
// back from it to Beast's parser (http/internal/beast_message.h). fuzz/http_head_fuzz.cc compares
// both with Beast's parser on made-up input; these pin the cases by name.
#include "http/internal/fast_head.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "http/internal/beast_message.h"

namespace kshard::http::fast_head {
namespace {

using beast_detail::MessageParser;

std::vector<Headers::Entry> entries(const Headers& h) { return {h.begin(), h.end()}; }

Outcome request(std::string_view in, Head& head, Headers& fields, std::size_t limit = 8192) {
  return parseRequestHead(in, limit, head, fields);
}

TEST(FastHeadTest, ReadsASimpleRequestHead) {
  const std::string wire =
      "POST /v1/entities/counter/a%2Fb?mode=tell HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
      "X-Empty: \r\n\r\nhello";
  Head head;
  Headers fields;
  ASSERT_EQ(request(wire, head, fields), Outcome::kParsed);
  EXPECT_EQ(head.method, "POST");
  EXPECT_EQ(head.target, "/v1/entities/counter/a%2Fb?mode=tell");
  EXPECT_EQ(head.version, 11u);
  EXPECT_EQ(head.contentLength, 5u);
  EXPECT_EQ(head.size, wire.size() - 5);
  EXPECT_TRUE(head.keepAlive());
  EXPECT_FALSE(head.expectContinue);
  // Content-Length is framing, not kept.
  EXPECT_EQ(entries(fields), (std::vector<Headers::Entry>{{"Host", "x"}, {"X-Empty", ""}}));
  EXPECT_EQ(fields.wire(), "Host: x\r\nX-Empty: \r\n");
  EXPECT_TRUE(fields.holdsAny(Headers::kHost));
  EXPECT_FALSE(fields.holdsAny(Headers::kFraming | Headers::kUserAgent | Headers::kConnection));
}

TEST(FastHeadTest, ReadsANameByTheTokenRuleWhateverByteAndWhereverItIs) {
  // RFC 9110's tchar.
  const auto isToken = [](unsigned char c) {
    return std::isalnum(c) != 0 ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  };
  // Every byte value at every position of a 20-byte name.
  for (std::size_t at = 0; at < 20; ++at) {
    for (int b = 0; b < 256; ++b) {
      const auto c = static_cast<unsigned char>(b);
      std::string name = "X-Long-Field-Name-09";
      name[at] = static_cast<char>(c);
      Head head;
      Headers fields;
      const Outcome outcome = request("GET / HTTP/1.1\r\n" + name + ": v\r\n\r\n", head, fields);
      if (isToken(c)) {
        ASSERT_EQ(outcome, Outcome::kParsed) << "byte " << b << " at " << at;
        ASSERT_EQ(entries(fields), (std::vector<Headers::Entry>{{name, "v"}})) << b << " at " << at;
      } else if (c == ':' && at > 0) {
        // The name ends there; the rest of the line is the value.
        ASSERT_EQ(outcome, Outcome::kParsed) << "byte " << b << " at " << at;
        ASSERT_EQ(entries(fields)[0].first, name.substr(0, at)) << "at " << at;
      } else {
        ASSERT_EQ(outcome, Outcome::kDecline) << "byte " << b << " at " << at;
      }
    }
  }
}

TEST(FastHeadTest, WritesFieldsNotInWireFormAsBeastReadsThem) {
  Head head;
  Headers fields;
  ASSERT_EQ(request("GET / HTTP/1.1\r\nA:b\r\nB: 1\r\nC:   d e  \r\nD: 2\r\nE:\r\nF: g\r\n\r\n",
                    head, fields),
            Outcome::kParsed);
  EXPECT_EQ(entries(fields),
            (std::vector<Headers::Entry>{
                {"A", "b"}, {"B", "1"}, {"C", "d e"}, {"D", "2"}, {"E", ""}, {"F", "g"}}));
  EXPECT_EQ(fields.wire(), "A: b\r\nB: 1\r\nC: d e\r\nD: 2\r\nE: \r\nF: g\r\n");
  EXPECT_EQ(fields.size(), 6u);

  // Known names are noted whichever way their line came.
  fields.clear();
  ASSERT_EQ(request("GET / HTTP/1.1\r\nuser-agent:x\r\nConnection: close\r\n\r\n", head, fields),
            Outcome::kParsed);
  EXPECT_TRUE(fields.holdsAny(Headers::kUserAgent));
  EXPECT_TRUE(fields.holdsAny(Headers::kConnection));
  EXPECT_FALSE(fields.holdsAny(Headers::kHost));
}

TEST(FastHeadTest, ReadsConnectionAndExpect) {
  Head head;
  Headers fields;
  ASSERT_EQ(request("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", head, fields),
            Outcome::kParsed);
  EXPECT_EQ(head.version, 10u);
  EXPECT_TRUE(head.keepAlive());

  head = {};
  ASSERT_EQ(request("GET / HTTP/1.0\r\n\r\n", head, fields), Outcome::kParsed);
  EXPECT_FALSE(head.keepAlive());

  head = {};
  ASSERT_EQ(request("GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n", head, fields),
            Outcome::kParsed);
  EXPECT_FALSE(head.keepAlive());

  head = {};
  ASSERT_EQ(request("PUT / HTTP/1.1\r\nexpect: 100-CONTINUE\r\n\r\n", head, fields),
            Outcome::kParsed);
  EXPECT_TRUE(head.expectContinue);
}

TEST(FastHeadTest, DeclinesWhatItDoesNotRead) {
  for (const std::string wire : {
           "GET / HTTP/1.1\r\nA: b\tc\r\n\r\n",         // a tab
           "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",      // obs-fold
           "GET / HTTP/1.1\r\nA: caf\xc3\xa9\r\n\r\n",  // obs-text
           "GET / HTTP/1.1\r\nA : b\r\n\r\n",           // a space before the colon
           "GET / HTTP/1.1\r\n: b\r\n\r\n",             // an empty name
           "GET / HTTP/1.1\r\nA\xff: b\r\n\r\n",        // not a token
           "GET / HTTP/1.1\r\nA: b\n\r\n",              // a bare LF
           "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
           "GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
           "GET / HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: 1,1\r\n\r\n",
           "GET / HTTP/1.1\r\nContent-Length: 12345678901234567890\r\n\r\n",
           "get / HTTP/1.1\r\n\r\n",              // not upper case
           "\r\nGET / HTTP/1.1\r\n\r\n",          // a leading empty line
           "GET  / HTTP/1.1\r\n\r\n",             // an empty target
           "GET /\xe2\x82\xac HTTP/1.1\r\n\r\n",  // a target with obs-text
           "GET / HTTP/2.0\r\n\r\n",
           "GET / HTTP/1.1 \r\n\r\n",
       }) {
    Head head;
    Headers fields;
    EXPECT_EQ(request(wire, head, fields), Outcome::kDecline) << wire;
  }
}

TEST(FastHeadTest, WaitsForTheRestOfAHeadCutAnywhereUpToTheLimit) {
  const std::string wire = "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
  for (std::size_t cut = 0; cut < wire.size(); ++cut) {
    Head head;
    Headers fields;
    EXPECT_EQ(request(wire.substr(0, cut), head, fields), Outcome::kNeedMore) << cut;
    // The same bytes at a limit they reach: the head is longer than the limit.
    EXPECT_EQ(request(wire.substr(0, cut), head, fields, cut), Outcome::kOverLimit) << cut;
  }
  Head head;
  Headers fields;
  EXPECT_EQ(request(wire, head, fields, wire.size()), Outcome::kParsed);
  EXPECT_EQ(request(wire, head, fields, wire.size() - 1), Outcome::kOverLimit);
}

TEST(FastHeadTest, ReadsAResponseHeadAndLeavesOthersToBeast) {
  Head head;
  Headers fields;
  ASSERT_EQ(parseResponseHead("HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}", 8192, head,
                              fields),
            Outcome::kParsed);
  EXPECT_EQ(head.status, 404);
  EXPECT_EQ(head.contentLength, 2u);
  for (const std::string wire : {
           "HTTP/1.1 100 Continue\r\n\r\n",
           "HTTP/1.1 20 OK\r\n\r\n",
           "HTTP/1.1 600 Odd\r\n\r\n",
           "HTTP/1.1 200 \xa0OK\r\n\r\n",
           "HTTP/1.1 200\r\n\r\n",
       }) {
    head = {};
    EXPECT_EQ(parseResponseHead(wire, 8192, head, fields), Outcome::kDecline) << wire;
  }
}

// Puts `pieces` one after the other, as the read loop does; returns the error, if any.
template <bool isRequest>
boost::beast::error_code feed(MessageParser<isRequest>& parser,
                              const std::vector<std::string>& pieces) {
  std::string buffer;
  std::size_t at = 0;
  boost::beast::error_code ec;
  for (const auto& piece : pieces) {
    buffer += piece;
    while (!parser.is_done() && at < buffer.size()) {
      at += parser.put(boost::asio::buffer(buffer.data() + at, buffer.size() - at), ec);
      if (ec == boost::beast::http::error::need_more) {
        ec = {};
        break;
      }
      if (ec) return ec;
    }
  }
  return ec;
}

TEST(MessageParserFastPathTest, ReadsASimpleRequestWhateverTheCuts) {
  const std::string wire = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world";
  const std::size_t headSize = wire.size() - 11;
  for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
    MessageParser<true> parser;
    parser.eager(true);
    ASSERT_FALSE(feed(parser, {wire.substr(0, cut), wire.substr(cut)})) << cut;
    ASSERT_TRUE(parser.is_done()) << cut;
    // A head cut in two is Beast's; a whole one (the body may be cut) is the fast path's.
    EXPECT_EQ(parser.fellBack(), cut != 0 && cut < headSize) << cut;
    EXPECT_EQ(parser.method(), Method::kPost);
    EXPECT_EQ(parser.get().target, "/x");
    EXPECT_EQ(parser.get().body, "hello world");
    EXPECT_EQ(parser.get().headers.wire(), "Host: h\r\n");
    EXPECT_TRUE(parser.keep_alive());
  }
}

TEST(MessageParserFastPathTest, AHeadSentAByteAtATimeIsBeastsAndItsLimitHolds) {
  const std::string wire = "POST /x HTTP/1.1\r\nHost: h\r\nX-A: " + std::string(200, 'a') +
                           "\r\nContent-Length: 2\r\n\r\nok";
  std::vector<std::string> bytes;
  for (const char c : wire) bytes.emplace_back(1, c);
  MessageParser<true> parser;
  parser.eager(true);
  ASSERT_FALSE(feed(parser, bytes));
  ASSERT_TRUE(parser.is_done());
  EXPECT_TRUE(parser.fellBack());
  EXPECT_EQ(parser.get().body, "ok");
  EXPECT_EQ(parser.get().headers.get("X-A"), std::string(200, 'a'));

  // The same head with a limit it passes: refused once the limit is reached.
  MessageParser<true> limited;
  limited.header_limit(100);
  EXPECT_EQ(feed(limited, bytes), boost::beast::http::error::header_limit);
}

TEST(MessageParserFastPathTest, StopsAfterTheHeaderUnlessEager) {
  MessageParser<true> parser;
  boost::beast::error_code ec;
  const std::string wire = "PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  const std::size_t used = parser.put(boost::asio::buffer(wire), ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(used, wire.size() - 3);
  EXPECT_TRUE(parser.is_header_done());
  EXPECT_FALSE(parser.is_done());
  parser.eager(true);
  EXPECT_EQ(parser.put(boost::asio::buffer(wire.data() + used, 3), ec), 3u);
  EXPECT_TRUE(parser.is_done());
  EXPECT_EQ(parser.get().body, "abc");
}

TEST(MessageParserFastPathTest, FallsBackToBeastWithItsErrors) {
  {
    MessageParser<true> parser;
    parser.eager(true);
    ASSERT_FALSE(feed(parser, {"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                               "3\r\nabc\r\n0\r\n\r\n"}));
    EXPECT_TRUE(parser.fellBack());
    EXPECT_TRUE(parser.is_done());
    EXPECT_EQ(parser.get().body, "abc");
  }
  {
    MessageParser<true> parser;
    parser.body_limit(4);
    EXPECT_EQ(feed(parser, {"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n"}),
              boost::beast::http::error::body_limit);
  }
  {
    MessageParser<true> parser;
    parser.header_limit(20);
    EXPECT_EQ(feed(parser, {"GET /x HTTP/1.1\r\nHost: a-long-host-name\r\n\r\n"}),
              boost::beast::http::error::header_limit);
  }
  {
    MessageParser<true> parser;
    EXPECT_EQ(feed(parser, {"GET /x HTTP/1.1\r\nA: b\x01\r\n\r\n"}),
              boost::beast::http::error::bad_value);
  }
}

TEST(MessageParserFastPathTest, AResponseEndsWithItsLengthOrHasNoBody) {
  {
    MessageParser<false> parser;
    parser.eager(true);
    parser.skip(true);  // the answer to HEAD
    ASSERT_FALSE(feed(parser, {"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"}));
    EXPECT_TRUE(parser.is_done());
    EXPECT_FALSE(parser.fellBack());
    EXPECT_TRUE(parser.content_length() == boost::optional<std::uint64_t>(99));
  }
  {
    MessageParser<false> parser;
    parser.eager(true);
    ASSERT_FALSE(feed(parser, {"HTTP/1.1 304 Not Modified\r\n\r\n"}));
    EXPECT_TRUE(parser.is_done());
    EXPECT_FALSE(parser.fellBack());
  }
  {
    // No length: the body runs to the end of the stream, which Beast's parser reads.
    MessageParser<false> parser;
    parser.eager(true);
    ASSERT_FALSE(feed(parser, {"HTTP/1.1 200 OK\r\n\r\nto the end"}));
    EXPECT_TRUE(parser.fellBack());
    EXPECT_TRUE(parser.need_eof());
    boost::beast::error_code ec;
    parser.put_eof(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(parser.get().body, "to the end");
  }
  {
    MessageParser<false> parser;
    parser.eager(true);
    ASSERT_FALSE(feed(parser, {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"}));
    boost::beast::error_code ec;
    parser.put_eof(ec);
    EXPECT_EQ(ec, boost::beast::http::error::partial_message);
  }
}

}  // namespace
}  // namespace kshard::http::fast_head
