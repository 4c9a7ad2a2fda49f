#include "sidecar/app_host.h"

#include <strings.h>

#include "protocol/wire.h"
#include "sidecar/entity_request.h"

namespace kshard::sidecar {
namespace {

std::chrono::milliseconds toMillis(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

}  // namespace

std::string entityCallbackPath(const EntityKey& key) {
  return entityPath("/kshard/entities/", key);
}

bool isHopByHopHeader(std::string_view name) {
  static constexpr std::string_view kHopByHop[] = {"connection",
                                                   "keep-alive",
                                                   "proxy-connection",
                                                   "transfer-encoding",
                                                   "upgrade",
                                                   "te",
                                                   "trailer",
                                                   "content-length",
                                                   "host",
                                                   "proxy-authorization"};
  for (std::string_view h : kHopByHop) {
    if (h.size() == name.size() && ::strncasecmp(h.data(), name.data(), h.size()) == 0) {
      return true;
    }
  }
  return false;
}

AppHost::AppHost(http::Client& client, Duration deliverTimeout, Duration stopTimeout)
    : client_(client), deliverTimeout_(deliverTimeout), stopTimeout_(stopTimeout) {}

void AppHost::deliver(Message message, Epoch epoch,
                      std::function<void(StatusOr<http::Response>)> done) {
  http::Request req;
  req.method = http::Method::kPost;
  req.target = entityCallbackPath(message.key);
  req.headers = std::move(message.headers);
  req.headers.removeIf(isHopByHopHeader);
  req.headers.set(std::string(protocol::kShardHeader), std::to_string(message.shard));
  req.headers.set(std::string(protocol::kEpochHeader), std::to_string(epoch));
  req.headers.set(std::string(protocol::kModeHeader),
                  message.mode == DeliveryMode::kTell ? "tell" : "ask");
  req.body = std::move(message.body);
  req.timeout = toMillis(deliverTimeout_);
  client_.send(std::move(req), std::move(done));
}

void AppHost::stop(const EntityKey& key, ShardId shard, std::function<void(Status)> done) {
  http::Request req;
  req.method = http::Method::kPost;
  req.target = entityCallbackPath(key) + "/stop";
  req.headers.set(std::string(protocol::kShardHeader), std::to_string(shard));
  req.timeout = toMillis(stopTimeout_);
  client_.send(std::move(req), [done = std::move(done)](StatusOr<http::Response> r) {
    if (!r.ok()) {
      done(r.status().withContext("stop callback"));
    } else if (r->status < 200 || r->status >= 300) {
      done(unavailable("stop callback answered " + std::to_string(r->status)));
    } else {
      done({});
    }
  });
}

}  // namespace kshard::sidecar
