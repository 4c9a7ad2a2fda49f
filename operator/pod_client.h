// PodClient: how the operator calls a pod's peer API (sidecar, pod IP:7101) to ping it and to
// assign and unassign shards (DESIGN.md "Wire contracts", peer API).
//
// Calls are asynchronous and bounded by their timeout: `done` runs exactly once, on any thread
// (possibly inline), with the answer or a non-OK Status. Transport failures and timeouts are
// Unavailable / DeadlineExceeded; an unassign the pod could not finish within its handoff timeout
// (504 HandoffTimeout) is DeadlineExceeded naming the busy shards; any other refusal is
// FailedPrecondition with the pod's error code and message.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "protocol/wire.h"
#include "sharding/shard_id.h"

namespace kshard::manager {

// The answer to an unassign: OK once the pod released every shard. On a 504 HandoffTimeout,
// `busy` lists the shards of the request the pod still held busy (it released the others);
// empty for any other answer (nothing is known of which shards were released).
struct UnassignAnswer {
  Status status;
  std::vector<sharding::ShardId> busy;
};

class PodClient {
 public:
  using PingCallback = std::function<void(StatusOr<protocol::PingResponse>)>;
  using AssignCallback = std::function<void(StatusOr<protocol::AssignResponse>)>;
  using UnassignCallback = std::function<void(UnassignAnswer)>;

  virtual ~PodClient() = default;

  // GET /v1/ping at `address` ("ip:port"), meant for `target`, a pod of `shardMap` ("ns/name",
  // whose sidecars take only the operator's credentials for that map); a sidecar that is not
  // the target answers 409 WrongTarget: FailedPrecondition.
  virtual void ping(const std::string& address, const std::string& shardMap,
                    const protocol::Target& target, Duration timeout, PingCallback done) = 0;
  // POST /v1/shards/assign, to request.target. `shardCount` bounds the shard ids of the answer.
  virtual void assign(const std::string& address, const protocol::ShardsRequest& request,
                      std::int32_t shardCount, Duration timeout, AssignCallback done) = 0;
  // POST /v1/shards/unassign; OK once the pod has stopped the shards' entities (UnassignAnswer).
  virtual void unassign(const std::string& address, const protocol::ShardsRequest& request,
                        Duration timeout, UnassignCallback done) = 0;
  // The pod at `address` is gone: drop what is kept for it (its keep-alive connection).
  virtual void forget(const std::string& address) = 0;
};

}  // namespace kshard::manager
