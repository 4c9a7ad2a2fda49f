// Registration: the register calls of one ShardMapController. The API decides whether the caller
// is who it says it is (registerRefusal); registrations admitted while one is being written wait
// together and are recorded together, in one status write (applyRegistrations); then each is
// answered with the epoch, a restarted sidecar gets its shards again (resendAssign), and a round
// gives the new pods a share.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "operator/controller_operation.h"

namespace kshard::manager {

struct Refusal {
  int status;
  std::string_view code;
  std::string message;
};
// Why `pod` (what the API shows for the caller's name) may not register as `request` for the
// ShardMap `ref`: an alive pod of that name and uid, labelled for this map, at its own IP;
// nullopt when it may. Pure.
std::optional<Refusal> registerRefusal(const protocol::ShardMapRef& ref,
                                       const std::optional<PodInfo>& pod,
                                       const protocol::RegisterRequest& request);

// What recording one registration did.
struct RegisterOutcome {
  bool sameUid = false;   // the registered pod again (a restarted sidecar): keeps its shards
  bool deferred = false;  // answered 503: the pod it replaces may still run
  std::string replaced;   // uid of the pod this registration replaces
};
// Records `requests` in `map` and `table`. `replacedMayRun` is asked about a registered pod of
// the same name, another uid and some shards: true keeps it (and defers the registration).
// Pure but for what `replacedMayRun` does.
std::vector<RegisterOutcome> applyRegistrations(
    sharding::ShardMap& map, sharding::ShardTable& table,
    const std::vector<protocol::RegisterRequest>& requests, std::int64_t fenceFloor,
    const std::function<bool(const sharding::RegisteredPod&)>& replacedMayRun);

class Registration : public ControllerOperation {
 public:
  static constexpr std::size_t kMaxBatch = 256;

  using ControllerOperation::ControllerOperation;

  // A register call, on the strand of a replica that leads.
  void registerPod(const protocol::RegisterRequest& request, const Reply& reply);
  // Leadership lost or the map deleted: later calls start a new batch.
  void closeBatch() { openBatch_.reset(); }

 private:
  struct Batch {
    std::vector<std::pair<protocol::RegisterRequest, Reply>> items;  // distinct pods
    void answerAll(const http::Response& r) const {
      for (const auto& item : items) item.second(r);
    }
  };
  using BatchPtr = std::shared_ptr<Batch>;

  void admit(protocol::RegisterRequest request, Reply reply);
  void enqueue(const BatchPtr& batch, int attempt, bool front);
  void run(const BatchPtr& batch, int attempt, std::function<void()> done);
  void record(const BatchPtr& batch, int attempt, std::function<void()> done);
  void answer(const BatchPtr& batch, const std::vector<RegisterOutcome>& outcomes,
              std::function<void()> done);
  // resendAssign for each pod in turn, then `then`.
  void resendEach(std::vector<std::string> pods, std::function<void()> then);
  void resendAssign(const std::string& podName, std::function<void()> done);

  // The batch the next queued "register" op will write; null when none is queued.
  BatchPtr openBatch_;
};

}  // namespace kshard::manager
