// The Beast adapter's own message reading and writing (http/internal/beast_message.h): what goes on
// the wire, byte for byte, and what a parsed message holds. The transport tests cover the same code
// end to end over sockets.
#include "http/internal/beast_message.h"

#include <gtest/gtest.h>

#include <string>

namespace kshard::http::beast_detail {
namespace {

template <bool isRequest>
void parseAll(MessageParser<isRequest>& parser, std::string_view wire) {
  parser.eager(true);
  boost::beast::error_code ec;
  const std::size_t used = parser.put(boost::asio::buffer(wire.data(), wire.size()), ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(used, wire.size());
  ASSERT_TRUE(parser.is_done());
}

TEST(RequestHeadTest, PostCarriesItsLengthAndTheDefaultFields) {
  Request r;
  r.method = Method::kPost;
  r.target = "/kshard/entities/counter/a%2Fb";
  r.headers.add("Content-Type", "application/json");
  r.headers.add("Content-Length", "999");         // framing: computed, never copied
  r.headers.add("Transfer-Encoding", "chunked");  // framing
  r.body = "{\"n\":1}";
  EXPECT_EQ(requestHead(r, "127.0.0.1:7000", "kshard-sidecar"),
            "POST /kshard/entities/counter/a%2Fb HTTP/1.1\r\n"
            "Content-Type: application/json\r\n"
            "Host: 127.0.0.1:7000\r\n"
            "User-Agent: kshard-sidecar\r\n"
            "Content-Length: 7\r\n"
            "\r\n");
}

TEST(RequestHeadTest, KeepsTheCallersHostAndUserAgentAndSendsNoLengthForAnEmptyGet) {
  Request r;
  r.headers.add("host", "example.test");
  r.headers.add("user-agent", "probe/1");
  EXPECT_EQ(requestHead(r, "127.0.0.1:7000", "kshard-sidecar"),
            "GET / HTTP/1.1\r\nhost: example.test\r\nuser-agent: probe/1\r\n\r\n");
}

TEST(RequestHeadTest, AnEmptyPostStillSaysItsLengthIsZero) {
  Request r;
  r.method = Method::kPost;
  r.target = "/x";
  EXPECT_EQ(requestHead(r, "h", ""), "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
}

TEST(RequestHeadTest, DropsFieldsThatWouldInjectHeaders) {
  Request r;
  r.headers.add("X-Ok", "fine");
  r.headers.add("X-Evil", "a\r\nX-Injected: yes");
  r.headers.add("X-Bad\nName", "v");
  r.headers.add("X-Nul", std::string("a\0b", 3));
  r.headers.add("", "empty name");
  r.headers.add("X-Colon:Name", "v");
  r.headers.add(std::string("X-Nul\0Name", 10), "v");
  r.headers.add("X-Cr", "a\rb");
  const std::string head = requestHead(r, "h", "");
  EXPECT_NE(head.find("X-Ok: fine\r\n"), std::string::npos);
  EXPECT_EQ(head.find("Injected"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Bad"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Nul"), std::string::npos) << head;
  EXPECT_EQ(head.find("empty name"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Colon"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Cr"), std::string::npos) << head;
  EXPECT_EQ(head.find("Name"), std::string::npos) << head;
}

// The check reads fields eight bytes at a time: a forbidden byte is found at every position of a
// word and of the tail, and clean fields of any length go through: UTF-8, punctuation, and the
// other control bytes (a tab sends its word to the byte-by-byte check).
TEST(RequestHeadTest, FindsAForbiddenByteAtEveryPositionOfALongField) {
  const std::string clean =
      "Abc-9 ;=/,\t\x0b\x0c\x0e\x1f\x7f\xc3\xa9\xff~!\"#$%&'()*+.<>?@[]^_`{|}";
  for (const char bad : {'\r', '\n', '\0', ':'}) {
    for (std::size_t at = 0; at < clean.size(); ++at) {
      std::string field = clean;
      field[at] = bad;
      Request r;
      r.headers.add("X-Name-" + field, "v");  // a colon is forbidden in names only
      r.headers.add("X-Value", field);
      const std::string head = requestHead(r, "h", "");
      EXPECT_EQ(head.find("X-Name-"), std::string::npos) << int(bad) << " at " << at;
      EXPECT_EQ(head.find("X-Value") != std::string::npos, bad == ':') << int(bad) << " at " << at;
    }
  }
  for (std::size_t length = 0; length <= clean.size(); ++length) {
    Request r;
    const std::string field = clean.substr(0, length);
    r.headers.add("X-" + field, field);
    EXPECT_NE(requestHead(r, "h", "").find("X-" + field + ": " + field + "\r\n"), std::string::npos)
        << "length " << length;
  }
}

TEST(ResponseHeadTest, KeepAliveHttp11HasNoConnectionField) {
  Headers h;
  h.add("Content-Type", "text/plain");
  h.add("Content-Length", "1");  // framing: computed
  h.add("Connection", "keep-alive");
  EXPECT_EQ(responseHead(200, h, 5, 11, false),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n");
}

TEST(ResponseHeadTest, ClosingSaysSoInHttp11AndKeepAliveIsExplicitInHttp10) {
  EXPECT_EQ(responseHead(503, {}, 0, 11, true),
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(responseHead(404, {}, 2, 10, false),
            "HTTP/1.0 404 Not Found\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(responseHead(404, {}, 2, 10, true),
            "HTTP/1.0 404 Not Found\r\nContent-Length: 2\r\n\r\n");
}

TEST(ResponseHeadTest, NoLengthWhereTheStatusForbidsABody) {
  EXPECT_EQ(responseHead(204, {}, 0, 11, false), "HTTP/1.1 204 No Content\r\n\r\n");
  EXPECT_EQ(responseHead(304, {}, 0, 11, false), "HTTP/1.1 304 Not Modified\r\n\r\n");
  EXPECT_TRUE(statusHasNoBody(101));
  EXPECT_FALSE(statusHasNoBody(200));
}

TEST(ResponseHeadTest, AsksToCloseReadsTheHandlersConnectionField) {
  Headers h;
  h.add("connection", "Close");
  EXPECT_TRUE(asksToClose(h));
  EXPECT_FALSE(asksToClose({}));
}

TEST(MessageParserTest, FillsARequestWithItsFieldsInOrderAndItsBody) {
  MessageParser<true> parser;
  parseAll(parser,
           "POST /v1/entities/counter/a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2\r\n"
           "Content-Length: 5\r\n\r\nhello");
  EXPECT_EQ(parser.method(), Method::kPost);
  EXPECT_EQ(parser.version(), 11u);
  EXPECT_TRUE(parser.keep_alive());
  EXPECT_FALSE(parser.expectsContinue());
  const Request& r = parser.get();
  EXPECT_EQ(r.target, "/v1/entities/counter/a");
  EXPECT_EQ(r.body, "hello");
  std::vector<Headers::Entry> fields(r.headers.begin(), r.headers.end());
  // Content-Length is framing: the body says it, and whoever writes the message on writes it.
  EXPECT_EQ(fields, (std::vector<Headers::Entry>{{"Host", "x"}, {"X-A", "1"}, {"x-a", "2"}}));
}

TEST(MessageParserTest, AnUnknownMethodIsKeptAsText) {
  MessageParser<true> parser;
  parseAll(parser, "QUERY / HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(parser.method().has_value());
  EXPECT_EQ(parser.methodText(), "QUERY");
  EXPECT_EQ(parser.version(), 10u);
  EXPECT_FALSE(parser.keep_alive());
}

TEST(MessageParserTest, SeesExpectContinue) {
  MessageParser<true> parser;
  boost::beast::error_code ec;
  const std::string head = "PUT /x HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n";
  parser.put(boost::asio::buffer(head), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_header_done());
  EXPECT_TRUE(parser.expectsContinue());
}

TEST(MessageParserTest, JoinsAChunkedResponseBody) {
  MessageParser<false> parser;
  parseAll(parser,
           "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
           "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n");
  EXPECT_EQ(parser.get().status, 201);
  EXPECT_EQ(parser.get().body, "abcde");
  EXPECT_TRUE(parser.get().headers.empty());
}

}  // namespace
}  // namespace kshard::http::beast_detail
