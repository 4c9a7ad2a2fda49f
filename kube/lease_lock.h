// LeaseLock: the leader-election record kept in a coordination.k8s.io/v1 Lease (client-go's
// resourcelock.LeaseLock). It remembers the Lease it last read or wrote, so that every update
// carries that resourceVersion: a candidate working from a stale view fails with Conflict instead
// of overwriting another's claim.
//
// Not thread-safe: owned by one LeaderElector and used on its strand.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "kube/client.h"

namespace kshard::kube {

struct LeaderElectionRecord {
  std::string holderIdentity;  // empty: nobody holds the lease
  int leaseDurationSeconds = 0;
  std::optional<WallTime> acquireTime;
  std::optional<WallTime> renewTime;
  int leaseTransitions = 0;

  friend bool operator==(const LeaderElectionRecord&, const LeaderElectionRecord&) = default;
};

// The record in a Lease's spec; absent or malformed fields read as empty.
LeaderElectionRecord leaseRecordFromLease(const nlohmann::json& lease);
// The spec for `record` (times as MicroTime).
nlohmann::json leaseSpecFromRecord(const LeaderElectionRecord& record);

class LeaseLock {
 public:
  LeaseLock(Client& client, std::string ns, std::string name,
            std::chrono::milliseconds requestTimeout);

  using RecordCallback = std::function<void(StatusOr<LeaderElectionRecord>)>;
  using DoneCallback = std::function<void(Status)>;

  // Reads the Lease; NotFound when it does not exist.
  void get(RecordCallback done);
  // Creates the Lease holding `record`; AlreadyExists when someone was faster.
  void create(const LeaderElectionRecord& record, DoneCallback done);
  // Writes `record` over the Lease last read or written, guarded by its resourceVersion
  // (FailedPrecondition when nothing was read yet).
  void update(const LeaderElectionRecord& record, DoneCallback done);

  // The resourceVersion of the Lease as last read or written ("" before that).
  std::string resourceVersion() const;
  // "demo/kshard-operator".
  std::string describe() const;

 private:
  // Sends `req` (a get, create or update of the Lease) and remembers the Lease the server
  // returns before `done` runs.
  void call(ApiRequest req, DoneCallback done);

  Client& client_;
  const std::string ns_;
  const std::string name_;
  const std::chrono::milliseconds requestTimeout_;
  // Shared with callbacks in flight, which may complete after the lock is gone.
  std::shared_ptr<std::optional<nlohmann::json>> lease_;
};

}  // namespace kshard::kube
