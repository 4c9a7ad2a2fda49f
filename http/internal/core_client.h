// CoreClient: the http::Client of an adapter (BeastClient, ChannelClient, CppRestClient), a handle
// on the adapter's core. The core holds the client's state and does its work; the callbacks in
// flight share it, so it may outlive the client. A Core provides
//
//   void send(Request request, ResponseCallback done);
//   StatusOr<std::unique_ptr<ResponseStream>> openStream(Request request);
//   void close();  // the client goes: ends what is in flight (see the adapter's header)
//
// Internal to http/: the public headers offer only the factory functions (makeBeastClient, ...).
#pragma once

#include <memory>
#include <utility>

#include "http/client.h"

namespace kshard::http {

template <typename C>
class CoreClient final : public Client {
 public:
  using Core = C;

  explicit CoreClient(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~CoreClient() override { core_->close(); }
  CoreClient(const CoreClient&) = delete;
  CoreClient& operator=(const CoreClient&) = delete;

  void send(Request request, ResponseCallback done) override {
    core_->send(std::move(request), std::move(done));
  }
  StatusOr<std::unique_ptr<ResponseStream>> openStream(Request request) override {
    return core_->openStream(std::move(request));
  }

  // For tests and diagnostics: the core's own counters.
  Core& core() const { return *core_; }

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace kshard::http
