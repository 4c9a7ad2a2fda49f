#include "operator/http_pod_client.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "protocol/audiences.h"

namespace kshard::manager {
namespace {

std::chrono::milliseconds toMillis(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

http::Request jsonPost(std::string target, std::string body) {
  http::Request r;
  r.method = http::Method::kPost;
  r.target = std::move(target);
  r.headers.set("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

// The body of a 200 answer decoded by `decode`; the transport error or the pod's error otherwise.
template <typename T, typename Decode>
StatusOr<T> decodeOk(StatusOr<http::Response> res, const char* what, Decode decode) {
  if (!res.ok()) return res.status();
  if (res->status != 200) return podErrorStatus(*res);
  StatusOr<T> value = decode(res->body);
  if (!value.ok()) return value.status().withContext(what);
  return value;
}

// The shards a 504 HandoffTimeout names as still busy ({"busy": "3,7-9"}), of those `asked`.
std::vector<sharding::ShardId> busyShards(const http::Response& response,
                                          const sharding::ShardSet& asked) {
  std::vector<sharding::ShardId> out;
  auto j = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("busy") || !j["busy"].is_string()) return out;
  auto busy = sharding::ShardSet::parse(j["busy"].get<std::string>(), sharding::kMaxShardCount);
  if (!busy.ok()) return out;
  busy->forEach([&](sharding::ShardId s) {
    if (asked.contains(s)) out.push_back(s);
  });
  return out;
}

}  // namespace

Status podErrorStatus(const http::Response& response) {
  std::string code;
  std::string message = response.body.substr(0, 512);
  auto j = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const auto& e = j["error"];
    if (e.contains("code") && e["code"].is_string()) code = e["code"].get<std::string>();
    if (e.contains("message") && e["message"].is_string()) {
      message = e["message"].get<std::string>();
    }
  }
  std::string text =
      "HTTP " + std::to_string(response.status) + (code.empty() ? "" : " " + code) + ": " + message;
  if (response.status == 504) return deadlineExceeded(std::move(text));
  if (response.status >= 500) return unavailable(std::move(text));
  return failedPrecondition(std::move(text));
}

HttpPodClient::Credentials sidecarTokenCredentials(kube::ServiceAccountTokens& tokens,
                                                   Audience audience) {
  return [&tokens, audience](const std::string& shardMap,
                             std::function<void(StatusOr<std::string>)> done) {
    tokens.get(audience(shardMap),
               [done = std::move(done)](StatusOr<std::string> token) {
                 if (!token.ok()) {
                   done(token.status());
                   return;
                 }
                 done("Bearer " + *token);
               });
  };
}

HttpPodClient::HttpPodClient(ClientFactory factory, Duration connectTimeout,
                             Credentials credentials)
    : factory_(std::move(factory)),
      connectTimeout_(connectTimeout),
      credentials_(std::move(credentials)) {}

HttpPodClient::~HttpPodClient() = default;

void HttpPodClient::send(const std::string& address, const std::string& shardMap,
                         http::Request request, Duration timeout,
                         std::function<void(StatusOr<http::Response>)> done) {
  if (!credentials_) {
    sendNow(address, std::move(request), timeout, std::move(done));
    return;
  }
  auto pending = std::make_shared<http::Request>(std::move(request));
  credentials_(shardMap, [this, address, shardMap, pending, timeout,
                          done = std::move(done)](StatusOr<std::string> authorization) mutable {
    if (!authorization.ok()) {
      done(authorization.status().withContext("the operator's credentials for ShardMap " +
                                              shardMap));
      return;
    }
    if (!authorization->empty()) {
      pending->headers.set(std::string(protocol::kAuthorizationHeader), std::move(*authorization));
    }
    sendNow(address, std::move(*pending), timeout, std::move(done));
  });
}

void HttpPodClient::sendNow(const std::string& address, http::Request request, Duration timeout,
                            std::function<void(StatusOr<http::Response>)> done) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mu_);
    reapLocked();
    auto it = clients_.find(address);
    if (it == clients_.end()) {
      http::ClientOptions options;
      options.baseUrl = "http://" + address;
      options.connectTimeout = toMillis(connectTimeout_);
      options.requestTimeout = toMillis(timeout);
      options.maxConnections = 4;
      options.userAgent = "kshard-operator";
      auto client = factory_(std::move(options));
      if (!client.ok()) {
        done(client.status().withContext("pod " + address));
        return;
      }
      it = clients_.emplace(address, std::make_shared<Entry>(Entry{std::move(*client), 0})).first;
    }
    entry = it->second;
    ++entry->inFlight;
  }
  request.timeout = toMillis(timeout);
  // The callback holds a plain pointer: the entry stays in clients_ or retired_ while a request
  // is in flight, and a client must never be destroyed from its own I/O thread (as it would be
  // if its own callback dropped the last reference).
  Entry* raw = entry.get();
  raw->client->send(std::move(request),
                    [this, raw, done = std::move(done)](StatusOr<http::Response> r) {
                      done(std::move(r));
                      std::lock_guard lock(mu_);
                      --raw->inFlight;
                    });
}

void HttpPodClient::reapLocked() {
  std::erase_if(retired_, [](const std::shared_ptr<Entry>& e) { return e->inFlight == 0; });
}

void HttpPodClient::ping(const std::string& address, const std::string& shardMap,
                         const protocol::Target& target, Duration timeout, PingCallback done) {
  http::Request r;
  r.method = http::Method::kGet;
  r.target = "/v1/ping?" + protocol::pingQuery(target);
  send(address, shardMap, std::move(r), timeout,
       [done = std::move(done)](StatusOr<http::Response> res) {
         done(decodeOk<protocol::PingResponse>(
             std::move(res), "ping answer",
             [](std::string_view b) { return protocol::decodePingResponse(b); }));
       });
}

void HttpPodClient::assign(const std::string& address, const protocol::ShardsRequest& request,
                           std::int32_t shardCount, Duration timeout, AssignCallback done) {
  send(address, request.shardMap, jsonPost("/v1/shards/assign", protocol::encode(request)), timeout,
       [done = std::move(done), shardCount](StatusOr<http::Response> res) {
         done(decodeOk<protocol::AssignResponse>(
             std::move(res), "assign answer", [shardCount](std::string_view b) {
               return protocol::decodeAssignResponse(b, shardCount);
             }));
       });
}

void HttpPodClient::unassign(const std::string& address, const protocol::ShardsRequest& request,
                             Duration timeout, UnassignCallback done) {
  send(address, request.shardMap, jsonPost("/v1/shards/unassign", protocol::encode(request)),
       timeout, [done = std::move(done), asked = request.shards](StatusOr<http::Response> res) {
         if (!res.ok()) {
           done({res.status(), {}});
           return;
         }
         if (res->status == 200) {
           done({});
           return;
         }
         done({podErrorStatus(*res),
               res->status == 504 ? busyShards(*res, asked) : std::vector<sharding::ShardId>{}});
       });
}

void HttpPodClient::forget(const std::string& address) {
  std::lock_guard lock(mu_);
  auto it = clients_.find(address);
  if (it == clients_.end()) return;
  retired_.push_back(std::move(it->second));
  clients_.erase(it);
  reapLocked();
}

std::size_t HttpPodClient::clients() const {
  std::lock_guard lock(mu_);
  return clients_.size();
}

}  // namespace kshard::manager
