// Streaming over both adapters: a handler that streams with Responder::startStream, and a client
// that reads with openStream, the way a Kubernetes watch is served and consumed.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "http/factory.h"
#include "tests/http/test_support.h"

namespace kshard::http {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait{10000};

class StreamTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    server_ = makeServer(GetParam(), ServerOptions{});
    server_->route(Method::kGet, "/watch", [this](Request, Responder r) {
      Headers h;
      h.set("Content-Type", "application/json");
      auto writer = r.startStream(200, std::move(h));
      std::lock_guard<std::mutex> lock(mu_);
      if (writer.ok()) writer_ = std::move(*writer);
      cv_.notify_all();
    });
    server_->route(Method::kGet, "/gone", [](Request, Responder r) {
      r.send(Response::error(410, "Expired", "too old resource version"));
    });
    const Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s.toString();
    ClientOptions o;
    o.baseUrl = "http://127.0.0.1:" + std::to_string(server_->port());
    auto c = makeClient(GetParam(), o);
    ASSERT_TRUE(c.ok()) << c.status().toString();
    client_ = std::move(*c);
  }

  void TearDown() override {
    writer_.reset();
    client_.reset();
    server_->stop();
  }

  std::unique_ptr<ResponseStream> open(std::string target = "/watch") {
    Request r;
    r.target = std::move(target);
    auto s = client_->openStream(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().toString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  StreamWriter& writer() {
    std::unique_lock<std::mutex> lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, kWait, [this] { return writer_ != nullptr; }))
        << "the handler did not start a stream";
    return *writer_;
  }

  // Reads until `expected` has arrived in full (TCP may split or merge chunks).
  static std::string readExactly(ResponseStream& s, const std::string& expected) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (got.size() < expected.size() && std::chrono::steady_clock::now() < deadline) {
      StatusOr<std::string> part = s.read(milliseconds(500));
      if (!part.ok() && part.status().code() == StatusCode::kDeadlineExceeded) continue;
      if (!part.ok() || part->empty()) break;
      got += *part;
    }
    return got;
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<StreamWriter> writer_;
};

TEST_P(StreamTest, ChunksArriveInOrderAsTheyAreWritten) {
  auto stream = open();
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(stream->status(), 200);
  EXPECT_EQ(stream->headers().get("Content-Type"), "application/json");
  StreamWriter& w = writer();
  // A JSON-lines watch whose lines are split across chunks; each part must arrive before the
  // next is written, or the client would be buffering the whole body.
  const std::vector<std::string> parts = {"{\"type\":\"ADDED\",",
                                          "\"n\":1}\n{\"type\":", "\"MODIFIED\",\"n\":2}\n"};
  std::string all;
  for (const auto& part : parts) {
    ASSERT_TRUE(w.write(part));
    EXPECT_EQ(readExactly(*stream, part), part);
    all += part;
  }
  w.finish();
  StatusOr<std::string> end = stream->read(kWait);
  ASSERT_TRUE(end.ok()) << end.status().toString();
  EXPECT_EQ(*end, "") << "a finished stream reads as empty";
}

TEST_P(StreamTest, AbortMidLineDeliversWhatWasSentThenFails) {
  auto stream = open();
  ASSERT_NE(stream, nullptr);
  StreamWriter& w = writer();
  ASSERT_TRUE(w.write("{\"type\":\"ADDED\"}\n{\"type\":\"MOD"));
  EXPECT_EQ(readExactly(*stream, "{\"type\":\"ADDED\"}\n{\"type\":\"MOD"),
            "{\"type\":\"ADDED\"}\n{\"type\":\"MOD");
  w.abort();
  EXPECT_FALSE(w.write("more")) << "a write after abort must report failure";
  StatusOr<std::string> next = stream->read(kWait);
  ASSERT_FALSE(next.ok()) << "a cut stream must not read as a clean end";
  EXPECT_EQ(next.status().code(), StatusCode::kUnavailable) << next.status().toString();
}

TEST_P(StreamTest, ReadTimesOutAndTheStreamStaysUsable) {
  auto stream = open();
  ASSERT_NE(stream, nullptr);
  StreamWriter& w = writer();
  StatusOr<std::string> quiet = stream->read(milliseconds(50));
  ASSERT_FALSE(quiet.ok());
  EXPECT_EQ(quiet.status().code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(w.write("later\n"));
  EXPECT_EQ(readExactly(*stream, "later\n"), "later\n");
}

TEST_P(StreamTest, CancelUnblocksABlockedRead) {
  auto stream = open();
  ASSERT_NE(stream, nullptr);
  writer();
  auto reader =
      std::async(std::launch::async, [&] { return stream->read(std::chrono::minutes(5)); });
  stream->cancel();
  ASSERT_EQ(reader.wait_for(kWait), std::future_status::ready) << "cancel() did not unblock read()";
  const StatusOr<std::string> r = reader.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
}

TEST_P(StreamTest, NonStreamedErrorIsReadableThroughTheStream) {
  auto stream = open("/gone");
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(stream->status(), 410);
  std::string body;
  while (true) {
    StatusOr<std::string> part = stream->read(kWait);
    ASSERT_TRUE(part.ok()) << part.status().toString();
    if (part->empty()) break;
    body += *part;
  }
  EXPECT_NE(body.find("\"Expired\""), std::string::npos) << body;
}

TEST_P(StreamTest, OpenAgainstAServerThatNeverAnswersTimesOut) {
  std::vector<Responder> held;
  std::mutex heldMu;
  auto server = makeServer(GetParam(), ServerOptions{});
  server->route(Method::kGet, "/never", [&](Request, Responder r) {
    std::lock_guard<std::mutex> lock(heldMu);
    held.push_back(std::move(r));
  });
  ASSERT_TRUE(server->start().ok());
  ClientOptions o;
  o.baseUrl = "http://127.0.0.1:" + std::to_string(server->port());
  auto c = makeClient(GetParam(), o);
  ASSERT_TRUE(c.ok());
  Request r;
  r.target = "/never";
  r.timeout = milliseconds(300);
  auto s = (*c)->openStream(std::move(r));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kDeadlineExceeded) << s.status().toString();
  {
    std::lock_guard<std::mutex> lock(heldMu);
    held.clear();
  }
  server->stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamTest,
                         ::testing::Values(Backend::kCppRest, Backend::kBeast),
                         testing::backendTestName);

}  // namespace
}  // namespace kshard::http
