#include "http/server.h"

#include <utility>

namespace kshard::http {

namespace {

// A Responder built from functions.
class FunctionTarget final : public ResponseTarget {
 public:
  FunctionTarget(Responder::SendFn send, Responder::StartStreamFn startStream)
      : send_(std::move(send)), startStream_(std::move(startStream)) {}

  void respond(std::uint64_t, Response&& response) override {
    Responder::SendFn send = std::move(send_);
    send(std::move(response));
  }
  bool canStream() const override { return static_cast<bool>(startStream_); }
  std::unique_ptr<StreamWriter> startStream(std::uint64_t, int status, Headers headers) override {
    Responder::StartStreamFn start = std::move(startStream_);
    return start(status, std::move(headers));
  }

 private:
  Responder::SendFn send_;
  Responder::StartStreamFn startStream_;
};

Response unanswered() { return Response::error(500, "Internal", "handler did not answer"); }

}  // namespace

std::unique_ptr<StreamWriter> ResponseTarget::startStream(std::uint64_t, int, Headers) {
  return nullptr;
}

Responder::Responder(std::shared_ptr<ResponseTarget> target, std::uint64_t token,
                     std::shared_ptr<void> keep)
    : keep_(std::move(keep)), target_(std::move(target)), token_(token) {}

Responder::Responder(SendFn send, StartStreamFn startStream)
    : target_(send ? std::make_shared<FunctionTarget>(std::move(send), std::move(startStream))
                   : nullptr) {}

Responder::Responder(Responder&& other) noexcept
    : keep_(std::move(other.keep_)),
      target_(std::move(other.target_)),
      token_(std::exchange(other.token_, 0)) {}

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    if (!sent()) send(unanswered());
    keep_ = std::move(other.keep_);
    target_ = std::move(other.target_);
    token_ = std::exchange(other.token_, 0);
  }
  return *this;
}

void Responder::sendUnanswered() { send(unanswered()); }

void Responder::send(Response response) {
  if (target_ == nullptr) return;
  // Taken before the call, so a target that drops the last reference to the connection (or
  // throws) never sees a second answer; `keep` goes after the target.
  std::shared_ptr<void> keep = std::move(keep_);
  std::shared_ptr<ResponseTarget> target = std::move(target_);
  target->respond(token_, std::move(response));
}

StatusOr<std::unique_ptr<StreamWriter>> Responder::startStream(int status, Headers headers) {
  if (target_ == nullptr) return failedPrecondition("the request was already answered");
  if (!target_->canStream()) return failedPrecondition("this server cannot stream responses");
  std::shared_ptr<void> keep = std::move(keep_);
  std::shared_ptr<ResponseTarget> target = std::move(target_);
  std::unique_ptr<StreamWriter> writer = target->startStream(token_, status, std::move(headers));
  if (writer == nullptr) return unavailable("the connection closed before the stream started");
  return writer;
}

}  // namespace kshard::http
