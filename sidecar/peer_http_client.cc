#include "sidecar/peer_http_client.h"

#include "protocol/wire.h"
#include "sidecar/app_host.h"
#include "sidecar/entity_request.h"

namespace kshard::sidecar {

std::string peerEntityPath(const EntityKey& key) {
  // A singleton has its own route: the entity route refuses its reserved type.
  if (key.type == kSingletonEntityType) {
    std::string path = "/v1/peer/singletons/";
    http::appendPercentEncoded(path, key.id);
    return path;
  }
  return entityPath("/v1/peer/entities/", key);
}

std::string peerTopicPath(const Publication& publication) {
  return topicPath("/v1/peer/topics/", publication);
}

PeerHttpClient::PeerHttpClient(ClientFactory factory, std::size_t maxPeers,
                               std::function<std::string()> authorization)
    : factory_(std::move(factory)), maxPeers_(maxPeers), authorization_(std::move(authorization)) {}

PeerHttpClient::Entry& PeerHttpClient::entryFor(const std::string& address) {
  if (auto it = clients_.find(address); it != clients_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    return it->second;
  }
  // Evict the least recently used idle clients beyond the limit.
  for (auto pos = lru_.end(); clients_.size() >= maxPeers_ && pos != lru_.begin();) {
    --pos;
    auto it = clients_.find(*pos);
    if (it->second.inFlight->load() == 0) {
      clients_.erase(it);
      pos = lru_.erase(pos);
    }
  }
  lru_.push_front(address);
  auto [it, inserted] = clients_.emplace(
      address,
      Entry{factory_("http://" + address), std::make_shared<std::atomic<int>>(0), lru_.begin()});
  return it->second;
}

ForwardResult PeerHttpClient::classify(StatusOr<http::Response> result) {
  ForwardResult out;
  if (!result.ok()) {
    out.detail = result.status().message();
    switch (result.status().code()) {
      case StatusCode::kUnavailable:
        // The adapters report Unavailable only when the request was not sent (no connection,
        // or a pooled connection found closed before writing), so a retry cannot duplicate it.
        out.outcome = ForwardOutcome::kUnreachable;
        break;
      case StatusCode::kDeadlineExceeded:
        out.outcome = ForwardOutcome::kTimedOut;
        break;
      default:
        // OutcomeUnknown (the exchange broke after the request went out) and anything else:
        // the owner may have taken it.
        out.outcome = ForwardOutcome::kFailed;
    }
    return out;
  }
  http::Response& r = *result;
  const auto code = r.headers.get(protocol::kErrorHeader);
  if (r.status == 409 && code == protocol::errors::kEntityNotManagedByThisPod) {
    out.outcome = ForwardOutcome::kNotManaged;
    out.detail = "EntityNotManagedByThisPod";
    return out;
  }
  if ((r.status == 401 && code == protocol::errors::kUnauthenticated) ||
      (r.status == 503 && code == protocol::errors::kAuthenticationUnavailable)) {
    out.outcome = ForwardOutcome::kCallerRefused;
    out.detail = std::string(*code) + ": " + r.body.substr(0, 512);
    return out;
  }
  out.outcome = ForwardOutcome::kAnswered;
  r.headers.removeIf(isHopByHopHeader);
  out.response = std::move(r);
  return out;
}

void PeerHttpClient::forward(const RouteOwner& owner, std::shared_ptr<const Message> message,
                             Epoch senderEpoch, Duration timeout, ForwardCallback done) {
  http::Request req;
  req.method = http::Method::kPost;
  req.target = peerEntityPath(message->key);
  req.headers.reserve(message->headers.wire().size() + kMessageFieldsBytes);
  req.headers = message->headers;
  addMessageFields(req.headers, message->shard, senderEpoch, message->mode);
  if (authorization_) req.headers.add(protocol::kAuthorizationHeader, authorization_());
  // The body stays in the message, which the router keeps for a retry.
  const std::string* body = &message->body;
  req.sharedBody = std::shared_ptr<const std::string>(std::move(message), body);
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  send(owner.address, std::move(req), std::move(done));
}

void PeerHttpClient::publish(const RouteOwner& pod, std::shared_ptr<const Publication> publication,
                             Duration timeout, ForwardCallback done) {
  http::Request req;
  req.method = http::Method::kPost;
  req.target = peerTopicPath(*publication);
  req.headers = publication->headers;
  // The headers were filtered when the app published: these are the only Kshard-* fields. The
  // topic travels in the path; the publisher is for the receiving app.
  req.headers.add(protocol::kPublisherHeader, publication->publisher);
  if (authorization_) req.headers.add(protocol::kAuthorizationHeader, authorization_());
  // One body for every pod's request, kept by the publisher until the last one answered.
  const std::string* body = &publication->body;
  req.sharedBody = std::shared_ptr<const std::string>(std::move(publication), body);
  req.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  send(pod.address, std::move(req), std::move(done));
}

void PeerHttpClient::send(const std::string& address, http::Request request, ForwardCallback done) {
  http::Client* client;
  std::shared_ptr<std::atomic<int>> inFlight;
  {
    std::lock_guard lock(mu_);
    Entry& entry = entryFor(address);
    // Counted before the lock is released, so the client cannot be evicted under the request.
    entry.inFlight->fetch_add(1);
    client = entry.client.get();
    inFlight = entry.inFlight;
  }
  client->send(std::move(request), [inFlight, done = std::move(done)](StatusOr<http::Response> r) {
    done(classify(std::move(r)));
    // Counted down after the callback: a client dropped from another thread meanwhile would wait
    // in its destructor for this callback, which may need a lock that thread holds.
    inFlight->fetch_sub(1);
  });
}

}  // namespace kshard::sidecar
