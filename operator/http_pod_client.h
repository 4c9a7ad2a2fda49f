// HttpPodClient: the PodClient over HTTP, one keep-alive http::Client per pod address.
//
// Answers are mapped to Status as pod_client.h says: transport errors and timeouts keep their
// codes (Unavailable, DeadlineExceeded); 504 HandoffTimeout from an unassign is DeadlineExceeded;
// other non-2xx answers are FailedPrecondition (4xx) or Unavailable (5xx), with the pod's error
// code and message. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http/client.h"
#include "operator/pod_client.h"

namespace kshard::manager {

class HttpPodClient final : public PodClient {
 public:
  using ClientFactory =
      std::function<StatusOr<std::unique_ptr<http::Client>>(http::ClientOptions options)>;

  // `connectTimeout` bounds connection set-up; each call's timeout bounds the whole request.
  // `authorization`, when set, gives the Authorization header of every call (the operator's
  // projected token, which sidecars with --peer-auth=token require).
  HttpPodClient(ClientFactory factory, Duration connectTimeout = std::chrono::seconds(2),
                std::function<std::string()> authorization = {});
  ~HttpPodClient() override;

  void ping(const std::string& address, const protocol::Target& target, Duration timeout,
            PingCallback done) override;
  void assign(const std::string& address, const protocol::ShardsRequest& request,
              std::int32_t shardCount, Duration timeout, AssignCallback done) override;
  void unassign(const std::string& address, const protocol::ShardsRequest& request,
                Duration timeout, UnassignCallback done) override;
  void forget(const std::string& address) override;

  // Clients currently kept (for tests).
  std::size_t clients() const;

 private:
  struct Entry {
    std::unique_ptr<http::Client> client;
    int inFlight = 0;
  };
  // Sends `request` to `address`; `done` gets the response or the transport error.
  void send(const std::string& address, http::Request request, Duration timeout,
            std::function<void(StatusOr<http::Response>)> done);
  void reapLocked();

  ClientFactory factory_;
  Duration connectTimeout_;
  std::function<std::string()> authorization_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> clients_;
  // Forgotten clients with requests in flight; destroyed on a later call (never inside their own
  // callback, which runs on their I/O thread).
  std::vector<std::shared_ptr<Entry>> retired_;
};

// The Status for a non-2xx answer of a pod: "HTTP 503 NotReady: the sidecar has no map yet".
Status podErrorStatus(const http::Response& response);

}  // namespace kshard::manager
