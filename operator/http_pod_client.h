// HttpPodClient: the PodClient over HTTP, one keep-alive http::Client per pod address.
//
// Every call carries the operator's credentials for the target's ShardMap (`Credentials`): with
// sidecars that run --peer-auth=token, a token minted for that map's audience only
// (protocol/audiences.h), so that a pod which receives it can use it against no other map.
//
// Answers are mapped to Status as pod_client.h says: transport errors and timeouts keep their
// codes (Unavailable, DeadlineExceeded); 504 HandoffTimeout from an unassign is DeadlineExceeded;
// other non-2xx answers are FailedPrecondition (4xx) or Unavailable (5xx), with the pod's error
// code and message. A call whose credentials cannot be had fails with their error, unsent.
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "http/client.h"
#include "kube/service_account_tokens.h"
#include "operator/pod_client.h"
#include "protocol/audiences.h"

namespace kshard::manager {

class HttpPodClient final : public PodClient {
 public:
  using ClientFactory =
      std::function<StatusOr<std::unique_ptr<http::Client>>(http::ClientOptions options)>;
  // The Authorization header of a call to a pod of `shardMap` ("ns/name"): `done` gets its value,
  // "" to send none, or an error. Runs `done` once, on any thread.
  using Credentials = std::function<void(const std::string& shardMap,
                                         std::function<void(StatusOr<std::string>)> done)>;

  // `connectTimeout` bounds connection set-up; each call's timeout bounds the whole request.
  // `credentials` null: no Authorization header (sidecars with --peer-auth=none).
  HttpPodClient(ClientFactory factory, Duration connectTimeout = std::chrono::seconds(2),
                Credentials credentials = {});
  ~HttpPodClient() override;

  void ping(const std::string& address, const std::string& shardMap, const protocol::Target& target,
            Duration timeout, PingCallback done) override;
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
  // Sends `request` to `address`, a pod of `shardMap`, with its credentials; `done` gets the
  // response, the transport error or the credentials' error.
  void send(const std::string& address, const std::string& shardMap, http::Request request,
            Duration timeout, std::function<void(StatusOr<http::Response>)> done);
  void sendNow(const std::string& address, http::Request request, Duration timeout,
               std::function<void(StatusOr<http::Response>)> done);
  void reapLocked();

  ClientFactory factory_;
  Duration connectTimeout_;
  Credentials credentials_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> clients_;
  // Forgotten clients with requests in flight; destroyed on a later call (never inside their own
  // callback, which runs on their I/O thread).
  std::vector<std::shared_ptr<Entry>> retired_;
};

// The Status for a non-2xx answer of a pod: "HTTP 503 NotReady: the sidecar has no map yet".
Status podErrorStatus(const http::Response& response);

// Credentials from `tokens`: "Bearer <token>", the ServiceAccount's token for the audience of the
// map's sidecars (protocol::sidecarAudience). `tokens` must outlive the client.
// `audience` names the token's audience for a map: the sidecars' commands by default, or
// protocol::mapAnswerAudience for the manager's answers to reads of the map's changes.
using Audience = std::string (*)(std::string_view shardMap);
HttpPodClient::Credentials sidecarTokenCredentials(kube::ServiceAccountTokens& tokens,
                                                   Audience audience = &protocol::sidecarAudience);

}  // namespace kshard::manager
