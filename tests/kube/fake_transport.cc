#include "tests/kube/fake_transport.h"

#include <gtest/gtest.h>

#include <utility>

namespace kshard::kube::testing {
namespace {

// openStream returns a unique_ptr; the test keeps a shared_ptr to the same stream.
class SharedStream final : public http::ResponseStream {
 public:
  explicit SharedStream(std::shared_ptr<FakeStream> s) : s_(std::move(s)) {}
  int status() const override { return s_->status(); }
  const http::Headers& headers() const override { return s_->headers(); }
  StatusOr<std::string> read(std::chrono::milliseconds timeout) override {
    return s_->read(timeout);
  }
  void cancel() override { s_->cancel(); }

 private:
  std::shared_ptr<FakeStream> s_;
};

}  // namespace

std::unique_ptr<http::ResponseStream> streamHandle(std::shared_ptr<FakeStream> stream) {
  return std::make_unique<SharedStream>(std::move(stream));
}

http::Response jsonResponse(int status, const std::string& body) {
  http::Response r;
  r.status = status;
  r.headers.set("Content-Type", "application/json");
  r.body = body;
  return r;
}

FakeStream::FakeStream(int status, std::string body) : status_(status) {
  if (!body.empty()) {
    chunks_.push_back(std::move(body));
  }
  if (status_ < 200 || status_ >= 300) ended_ = true;
}

StatusOr<std::string> FakeStream::read(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const bool ready = cv_.wait_for(
      lock, timeout, [&] { return cancelled_ || !failure_.ok() || !chunks_.empty() || ended_; });
  if (cancelled_) return kshard::cancelled("stream cancelled");
  if (!chunks_.empty()) {
    std::string c = std::move(chunks_.front());
    chunks_.pop_front();
    return c;
  }
  if (!failure_.ok()) return failure_;
  if (ended_) return std::string();
  (void)ready;
  return deadlineExceeded("no data within the read timeout");
}

void FakeStream::cancel() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

bool FakeStream::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void FakeStream::write(std::string chunk) {
  {
    std::lock_guard lock(mu_);
    chunks_.push_back(std::move(chunk));
  }
  cv_.notify_all();
}

void FakeStream::end() {
  {
    std::lock_guard lock(mu_);
    ended_ = true;
  }
  cv_.notify_all();
}

void FakeStream::fail(Status why) {
  {
    std::lock_guard lock(mu_);
    failure_ = std::move(why);
  }
  cv_.notify_all();
}

void FakeTransport::setHandler(Handler handler) {
  std::lock_guard lock(mu_);
  handler_ = std::move(handler);
}

void FakeTransport::setStreamHandler(StreamHandler handler) {
  std::lock_guard lock(mu_);
  streamHandler_ = std::move(handler);
}

void FakeTransport::send(http::Request request, http::ResponseCallback done) {
  Handler handler;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    handler = handler_;
  }
  cv_.notify_all();
  std::optional<StatusOr<http::Response>> answer;
  if (handler) answer = handler(request);
  if (answer) {
    done(std::move(*answer));
    return;
  }
  {
    std::lock_guard lock(mu_);
    parked_.push_back({std::move(request), std::move(done)});
  }
  cv_.notify_all();
}

StatusOr<std::unique_ptr<http::ResponseStream>> FakeTransport::openStream(http::Request request) {
  StreamHandler handler;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    handler = streamHandler_;
  }
  auto [status, body] = handler ? handler(request) : std::pair<int, std::string>{200, ""};
  auto stream = std::make_shared<FakeStream>(status, std::move(body));
  {
    std::lock_guard lock(mu_);
    streams_.push_back({std::move(request), stream});
  }
  cv_.notify_all();
  return streamHandle(stream);
}

std::vector<http::Request> FakeTransport::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

std::size_t FakeTransport::requestCount() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

bool FakeTransport::waitForRequests(std::size_t n) {
  std::unique_lock lock(mu_);
  const bool ok = cv_.wait_for(lock, kWaitLimit, [&] { return requests_.size() >= n; });
  EXPECT_TRUE(ok) << "expected " << n << " requests, got " << requests_.size();
  return ok;
}

std::size_t FakeTransport::parked() const {
  std::lock_guard lock(mu_);
  return parked_.size();
}

bool FakeTransport::waitForParked(std::size_t n) {
  std::unique_lock lock(mu_);
  const bool ok = cv_.wait_for(lock, kWaitLimit, [&] { return parked_.size() >= n; });
  EXPECT_TRUE(ok) << "expected " << n << " parked requests, got " << parked_.size();
  return ok;
}

http::Request FakeTransport::parkedRequest() const {
  std::lock_guard lock(mu_);
  return parked_.empty() ? http::Request{} : parked_.front().request;
}

void FakeTransport::answer(StatusOr<http::Response> response) {
  Parked p;
  {
    std::lock_guard lock(mu_);
    if (parked_.empty()) {
      ADD_FAILURE() << "answer() without a parked request";
      return;
    }
    p = std::move(parked_.front());
    parked_.pop_front();
  }
  p.done(std::move(response));
}

FakeTransport::OpenedStream FakeTransport::nextStream() {
  std::unique_lock lock(mu_);
  const bool ok = cv_.wait_for(lock, kWaitLimit, [&] { return !streams_.empty(); });
  if (!ok) {
    ADD_FAILURE() << "no watch stream was opened within " << kWaitLimit.count() << " s";
    return {};
  }
  OpenedStream s = std::move(streams_.front());
  streams_.pop_front();
  return s;
}

}  // namespace kshard::kube::testing
