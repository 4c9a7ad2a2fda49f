#include "http/server.h"

#include <utility>

namespace kshard::http {

Responder::Responder(SendFn send, StartStreamFn startStream)
    : send_(std::move(send)), startStream_(std::move(startStream)) {}

Responder::Responder(Responder&& other) noexcept
    : send_(std::exchange(other.send_, nullptr)),
      startStream_(std::exchange(other.startStream_, nullptr)) {}

Responder& Responder::operator=(Responder&& other) noexcept {
  if (this != &other) {
    if (!sent()) send(Response::error(500, "Internal", "handler did not answer"));
    send_ = std::exchange(other.send_, nullptr);
    startStream_ = std::exchange(other.startStream_, nullptr);
  }
  return *this;
}

Responder::~Responder() {
  if (!sent()) send(Response::error(500, "Internal", "handler did not answer"));
}

void Responder::send(Response response) {
  if (send_ == nullptr) return;
  // Cleared before the call, so a send function that drops the last reference to the
  // connection (or throws) never sees a second answer.
  SendFn send = std::exchange(send_, nullptr);
  startStream_ = nullptr;
  send(std::move(response));
}

StatusOr<std::unique_ptr<StreamWriter>> Responder::startStream(int status, Headers headers) {
  if (send_ == nullptr) return failedPrecondition("the request was already answered");
  if (startStream_ == nullptr) return failedPrecondition("this server cannot stream responses");
  StartStreamFn start = std::exchange(startStream_, nullptr);
  send_ = nullptr;
  std::unique_ptr<StreamWriter> writer = start(status, std::move(headers));
  if (writer == nullptr) return unavailable("the connection closed before the stream started");
  return writer;
}

}  // namespace kshard::http
