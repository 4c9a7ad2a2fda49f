// PeerClient: forwards a message to the sidecar that owns its shard (the peer API,
// POST /v1/peer/entities/{type}/{id}), and sends a topic's publication to one pod's sidecar
// (POST /v1/peer/topics/{topic}).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/unique_function.h"
#include "http/message.h"
#include "sidecar/entity_registry.h"
#include "sidecar/publication.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

enum class ForwardOutcome {
  kAnswered,    // the owner answered (the app's response, or an error to pass on as is)
  kNotManaged,  // the owner refused: it does not own the shard (any more, or yet); retry
  // The owner refused this sidecar's credentials (401), or cannot verify them yet (503
  // AuthenticationUnavailable); nothing was delivered, retry (the token or its view may change)
  kCallerRefused,
  kUnreachable,  // no connection could be made, so the message surely did not arrive; retry
  kFailed,       // the request may have arrived but no answer came back; do not retry
  kTimedOut,     // as kFailed, because `timeout` passed
};

struct ForwardResult {
  ForwardOutcome outcome = ForwardOutcome::kFailed;
  http::Response response;  // kAnswered: what to return to the caller
  std::string detail;       // for logs and the error message of a final failure
};

class PeerClient {
 public:
  using ForwardCallback = UniqueFunction<void(ForwardResult&&)>;

  virtual ~PeerClient() = default;
  // Calls `done` exactly once, from any thread, at the latest after `timeout`. The body of
  // `message` is sent from where it is, without a copy: `message` is kept until `done` ran.
  virtual void forward(const RouteOwner& owner, std::shared_ptr<const Message> message,
                       Epoch senderEpoch, Duration timeout, ForwardCallback done) = 0;
  // Sends `publication` to the sidecar of `pod`, with the same outcomes (kNotManaged aside: a
  // pod's refusal of a publication is an answer, kAnswered). Same contract as forward.
  virtual void publish(const RouteOwner& pod, std::shared_ptr<const Publication> publication,
                       Duration timeout, ForwardCallback done) = 0;
};

// Tells the operator that a pod did not answer (notify-unhealthy). Implementations rate-limit.
class UnhealthyReporter {
 public:
  virtual ~UnhealthyReporter() = default;
  virtual void reportUnreachable(const std::string& pod) = 0;
};

}  // namespace kshard::sidecar
