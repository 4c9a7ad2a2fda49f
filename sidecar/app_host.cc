#include "sidecar/app_host.h"

#include "protocol/wire.h"
#include "sidecar/entity_request.h"

namespace kshard::sidecar {
namespace {

std::chrono::milliseconds toMillis(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

}  // namespace

std::string entityCallbackPath(const EntityKey& key) {
  if (key.type == kSingletonEntityType) {
    std::string path = "/kshard/singletons/";
    http::appendPercentEncoded(path, key.id);
    return path;
  }
  return entityPath("/kshard/entities/", key);
}

std::string topicCallbackPath(std::string_view topic) {
  return "/kshard/topics/" + http::percentEncode(topic);
}

bool isHopByHopHeader(std::string_view name) {
  // Called for every field of every message, several times: dispatch on the length first, so
  // that most fields are compared with no name at all.
  using http::equalsIgnoreCase;
  switch (name.size()) {
    case 2:
      return equalsIgnoreCase(name, "te");
    case 4:
      return equalsIgnoreCase(name, "host");
    case 7:
      return equalsIgnoreCase(name, "upgrade") || equalsIgnoreCase(name, "trailer");
    case 10:
      return equalsIgnoreCase(name, "connection") || equalsIgnoreCase(name, "keep-alive");
    case 14:
      return equalsIgnoreCase(name, "content-length");
    case 16:
      return equalsIgnoreCase(name, "proxy-connection");
    case 17:
      return equalsIgnoreCase(name, "transfer-encoding");
    case 19:
      return equalsIgnoreCase(name, "proxy-authorization");
    default:
      return false;
  }
}

AppHost::AppHost(http::Client& client, Duration deliverTimeout, Duration stopTimeout,
                 std::string incarnation)
    : client_(client),
      deliverTimeout_(deliverTimeout),
      stopTimeout_(stopTimeout),
      incarnation_(std::move(incarnation)) {}

std::optional<std::chrono::milliseconds> AppHost::budget(Duration timeout) const {
  if (!deadline_) return toMillis(timeout);
  const SteadyTime end = deadline_();
  if (end == SteadyTime::max()) return toMillis(timeout);
  const Duration left = end - SystemClock::instance().now();
  if (left <= Duration::zero()) return std::nullopt;
  return toMillis(std::min(timeout, std::max<Duration>(left, std::chrono::milliseconds(1))));
}

std::optional<http::Request> AppHost::callback(std::string target, Duration timeout,
                                               http::Headers headers) const {
  const auto millis = budget(timeout);
  if (!millis) return std::nullopt;
  std::optional<http::Request> req(std::in_place);
  req->method = http::Method::kPost;
  req->target = std::move(target);
  req->headers = std::move(headers);
  req->timeout = *millis;
  return req;
}

void AppHost::addIncarnation(http::Headers& headers) const {
  if (!incarnation_.empty()) headers.addParsed(protocol::kIncarnationHeader, incarnation_);
}

void AppHost::deliver(Message message, Epoch epoch,
                      UniqueFunction<void(StatusOr<http::Response>&&)> done) {
  // Room for what is added below, so the fields are appended without a reallocation.
  message.headers.reserve(message.headers.wire().size() + kMessageFieldsBytes +
                          incarnation_.size() + 60);
  auto req = callback(entityCallbackPath(message.key), deliverTimeout_, std::move(message.headers));
  if (!req) {
    done(unavailable("the ownership lease has run out: the message was not sent to the app"));
    return;
  }
  addMessageFields(req->headers, message.shard, epoch, message.mode);
  addIncarnation(req->headers);
  if (message.turn != 0)
    req->headers.addParsed(protocol::kTurnHeader, std::to_string(message.turn));
  req->body = std::move(message.body);
  client_.send(std::move(*req), std::move(done));
}

void AppHost::deliverTopic(std::shared_ptr<const Publication> publication,
                           UniqueFunction<void(StatusOr<http::Response>&&)> done) {
  auto req = callback(topicCallbackPath(publication->topic), deliverTimeout_, publication->headers);
  if (!req) {
    done(unavailable("the ownership lease has run out: the publication was not sent to the app"));
    return;
  }
  // Both validated as writable (a topic has no control character; a publisher's pod name is a
  // field the peer API parsed); add() checks again.
  req->headers.add(protocol::kTopicHeader, publication->topic);
  req->headers.add(protocol::kPublisherHeader, publication->publisher);
  addIncarnation(req->headers);
  const std::string* body = &publication->body;
  req->sharedBody = std::shared_ptr<const std::string>(std::move(publication), body);
  client_.send(std::move(*req), std::move(done));
}

void AppHost::stop(const EntityKey& key, ShardId shard, std::uint64_t lastTurn,
                   std::function<void(Status)> done) {
  auto req = callback(entityCallbackPath(key) + "/stop", stopTimeout_);
  if (!req) {
    done(unavailable("the ownership lease has run out: stop not sent"));
    return;
  }
  req->headers.set(std::string(protocol::kShardHeader), std::to_string(shard));
  addIncarnation(req->headers);
  if (lastTurn != 0) req->headers.addParsed(protocol::kTurnHeader, std::to_string(lastTurn));
  client_.send(std::move(*req), [done = std::move(done)](StatusOr<http::Response> r) {
    if (!r.ok()) {
      done(r.status().withContext("stop callback"));
    } else if (r->status < 200 || r->status >= 300) {
      done(unavailable("stop callback answered " + std::to_string(r->status)));
    } else {
      done({});
    }
  });
}

void AppHost::start(const EntityKey& key, ShardId shard, Epoch epoch, std::uint64_t turn,
                    StartCallback done) {
  auto req = callback(entityCallbackPath(key) + "/start", deliverTimeout_);
  if (!req) {
    done(unavailable("the ownership lease has run out: start not sent"));
    return;
  }
  req->headers.set(std::string(protocol::kShardHeader), std::to_string(shard));
  req->headers.set(std::string(protocol::kEpochHeader), std::to_string(epoch));
  addIncarnation(req->headers);
  if (turn != 0) req->headers.addParsed(protocol::kTurnHeader, std::to_string(turn));
  client_.send(std::move(*req), [done = std::move(done)](StatusOr<http::Response> r) mutable {
    if (!r.ok()) {
      done(r.status().withContext("start callback"));
    } else if (r->status < 200 || r->status >= 300) {
      done(unavailable("start callback answered " + std::to_string(r->status)));
    } else {
      done(std::move(r));
    }
  });
}

void AppHost::reset(Duration timeout, std::function<void(Status)> done) {
  http::Request req;
  req.method = http::Method::kPost;
  req.target = "/kshard/reset";
  addIncarnation(req.headers);
  req.timeout = toMillis(timeout);
  client_.send(std::move(req), [done = std::move(done)](StatusOr<http::Response> r) {
    if (!r.ok()) {
      done(r.status().withContext("reset callback"));
    } else if (r->status == 404 || r->status == 405 || r->status == 501) {
      done(failedPrecondition(
          "the app answered " + std::to_string(r->status) +
          " to POST /kshard/reset: it must implement the reset callback of the app contract "
          "(stop and save every entity it holds, then answer 2xx)"));
    } else if (r->status < 200 || r->status >= 300) {
      done(unavailable("reset callback answered " + std::to_string(r->status) + ": " +
                       r->body.substr(0, 256)));
    } else {
      done({});
    }
  });
}

}  // namespace kshard::sidecar
