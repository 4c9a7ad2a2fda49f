// ManagerClient: the sidecar's side of the manager API (the operator's leader, :7200):
// register, unregister and notify-unhealthy.
//
// The manager's address comes from the watched ShardMap (status.manager), or --manager-address.
// A follower's 503 NotLeader is retried with backoff: its "leader" hint is not followed, since
// the calls carry this pod's token and only the manager the ShardMap names may receive it.
// Register is retried with backoff until it succeeds: a pod the operator does not yet see alive
// (its informer lags) is refused with PodNotAlive and simply tries again. Unhealthy reports are
// rate-limited per pod.
//
// A register or renew the manager answered confirms this pod's ownership lease
// (sidecar/ownership_lease.h) as of the moment the request was sent: `onConfirmed` gets it.
//
// An unregister the manager defers (409 UnregisterDeferred: pods of a newer version are starting,
// operator/unregister_hold.h) is asked again after the answer's retryAfterMs, and its deadline
// moves out to cover the hold the answer announces plus the call's own timeout.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "http/client.h"
#include "kube/lifetime.h"
#include "sidecar/identity.h"
#include "sidecar/peer_client.h"
#include "sidecar/routing_table.h"

namespace kshard::sidecar {

class ManagerClient final : public UnhealthyReporter {
 public:
  using ClientFactory = std::function<std::unique_ptr<http::Client>(const std::string& baseUrl)>;
  struct Options {
    Duration initialBackoff = std::chrono::milliseconds(200);
    Duration maxBackoff = std::chrono::seconds(5);
    Duration requestTimeout = std::chrono::seconds(10);
    Duration reportInterval = std::chrono::seconds(5);  // per unreachable pod
    std::string managerOverride;  // "host:port" to use instead of status.manager
    // A register or renew succeeded; its request was sent at `sentAt`.
    std::function<void(SteadyTime sentAt)> onConfirmed;
  };

  ManagerClient(Identity self, RoutingTable& table, ClientFactory factory, Scheduler& scheduler,
                Random& random, Logger logger, Options options,
                std::function<std::string()> authorization = nullptr);
  ~ManagerClient() override;

  // Registers this pod, retrying until it succeeds or stop(); `done` gets the epoch.
  void registerPod(std::function<void(StatusOr<std::uint64_t>)> done);
  // One read of the map's changes since version `since` for a watch that announced `want`
  // (GET .../assignments?since=&want=, operator/map_history.h): the manager's answer whatever
  // its status, or the transport's error; Unavailable while no manager is known. Never retried,
  // and it confirms nothing: any pod of the namespace may read the map.
  void readChanges(const std::string& since, const std::string& want, Duration timeout,
                   std::function<void(StatusOr<http::Response>)> done);
  // Unregisters, retrying until it succeeds or `timeout` passes (plus any hold the manager
  // announces). Each attempt may take `timeout`: the manager answers after it has unassigned the
  // pod's shards, which waits for their entities to stop. The answer says whether the API
  // showed the pod being deleted.
  void unregisterPod(Duration timeout, std::function<void(StatusOr<protocol::EpochResponse>)> done);
  // One renew of the ownership lease (no retry: the caller renews periodically). NotFound when
  // the manager does not know this pod registered as this incarnation.
  void renew(Duration timeout, std::function<void(Status)> done);
  void reportUnreachable(const std::string& pod) override;
  // Stops retry loops (a call waiting for its retry gets Cancelled). Once it returns no callback
  // runs: one running finishes first, and a call still on the wire, or whose retry was already
  // starting, is dropped unanswered. The callers may then be destroyed, before this client is;
  // none may wait for an answer after stop().
  void stop();

 private:
  struct Call;
  void attempt(const std::shared_ptr<Call>& call);
  // A request to this map's `verb` ("register", "assignments?since=..."), with the pod's token.
  http::Request managerRequest(http::Method method, const std::string& verb) const;
  // The manager's answer (or the transport's error) to one attempt of `call`, sent to `address`.
  void onAnswer(const std::shared_ptr<Call>& call, const std::string& address,
                StatusOr<http::Response> r);
  // Tries again after a backoff, or after `after` when the manager said when.
  void retryLater(const std::shared_ptr<Call>& call, const std::string& why,
                  std::optional<Duration> after = std::nullopt);
  // A 409 UnregisterDeferred: true when it was one (and the call goes on).
  bool deferred(const std::shared_ptr<Call>& call, const http::Response& r);
  std::string managerAddress() const;
  http::Client& clientFor(const std::string& address);

  Identity self_;
  RoutingTable& table_;
  ClientFactory factory_;
  Scheduler& scheduler_;
  Logger log_;
  Options options_;
  std::function<std::string()> authorization_;

  std::mutex mu_;
  Random& random_;  // under mu_
  bool stopped_ = false;
  std::map<std::string, std::unique_ptr<http::Client>> clients_;
  std::map<std::string, SteadyTime> lastReport_;
  std::map<Scheduler::TaskId, std::shared_ptr<Call>> waiting_;
  // Guards the answers of calls on the wire and the retries' tasks; ended by stop().
  kube::Lifetime lifetime_;
};

}  // namespace kshard::sidecar
