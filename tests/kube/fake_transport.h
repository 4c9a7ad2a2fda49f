// FakeTransport: a scripted http::Client for kube's unit tests. Requests are recorded; each is
// answered by the test's handler (inline, on the calling thread) or parked until the test answers
// it. Streams (watches) are handed out as FakeStreams the test writes to, cuts or ends.
//
// Thread-safe. Waits are on real time with a deadline and fail the test with a message.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "http/client.h"

namespace kshard::kube::testing {

inline constexpr std::chrono::seconds kWaitLimit{10};

// The test's side of a streamed response.
class FakeStream final : public http::ResponseStream {
 public:
  FakeStream(int status, std::string body);
  int status() const override { return status_; }
  const http::Headers& headers() const override { return headers_; }
  StatusOr<std::string> read(std::chrono::milliseconds timeout) override;
  void cancel() override;

  // Test side.
  void write(std::string chunk);
  void end();             // the body ends cleanly
  void fail(Status why);  // the connection breaks
  bool cancelled() const;

 private:
  const int status_;
  http::Headers headers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> chunks_;
  bool ended_ = false;
  bool cancelled_ = false;
  Status failure_;
};

class FakeTransport final : public http::Client {
 public:
  // Returns the answer, or nullopt to park the request for answer().
  using Handler = std::function<std::optional<StatusOr<http::Response>>(const http::Request&)>;
  // For openStream: the status and body of the stream's response (non-2xx for an error).
  using StreamHandler = std::function<std::pair<int, std::string>(const http::Request&)>;

  void setHandler(Handler handler);
  void setStreamHandler(StreamHandler handler);

  void send(http::Request request, http::ResponseCallback done) override;
  StatusOr<std::unique_ptr<http::ResponseStream>> openStream(http::Request request) override;

  // Every request sent or opened so far, in order.
  std::vector<http::Request> requests() const;
  std::size_t requestCount() const;
  // Waits until at least `n` requests arrived; false (and a gtest failure) on timeout.
  bool waitForRequests(std::size_t n);
  // Parked requests.
  std::size_t parked() const;
  bool waitForParked(std::size_t n);
  // Answers the oldest parked request (outside the lock, on this thread).
  void answer(StatusOr<http::Response> response);
  // The request behind the oldest parked one.
  http::Request parkedRequest() const;

  // Waits for the next stream opened (in order) and returns its test side with its request.
  struct OpenedStream {
    http::Request request;
    std::shared_ptr<FakeStream> stream;
  };
  OpenedStream nextStream();

 private:
  struct Parked {
    http::Request request;
    http::ResponseCallback done;
  };
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Handler handler_;
  StreamHandler streamHandler_;
  std::vector<http::Request> requests_;
  std::deque<Parked> parked_;
  std::deque<OpenedStream> streams_;
};

// A response with a JSON body.
http::Response jsonResponse(int status, const std::string& body);
// A ResponseStream that reads from `stream`, which the test keeps (openStream hands out
// unique_ptrs).
std::unique_ptr<http::ResponseStream> streamHandle(std::shared_ptr<FakeStream> stream);

}  // namespace kshard::kube::testing
