// SidecarServer: one kshard-sidecar, its parts wired together (DESIGN.md "Flows"): the clients to
// the app, the peers and the manager; the entity registry and the router; the app, peer and
// admin servers; the ShardMap source; registration, the ownership lease and the drain.
//
// Its life, as kshard-sidecar's main runs it:
//   build  every part, from the configuration; nothing listens and no part runs yet;
//   start  the servers, the ShardMap source and the registration (sidecar/registrar.h);
//   drain  on SIGTERM: hands this pod's shards back (sidecar/drainer.h); readiness turns false;
//   stop   stops the parts in order, the app's requests still in flight answered first.
// Readiness (/readyz on the admin port, notReadyReason) is true once registered and until a
// drain starts.
//
// The object must outlive every callback its parts scheduled: destroy it only after stop() (the
// binary instead exits without destroying it: see sidecar/main.cc).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "http/client.h"
#include "http/factory.h"
#include "http/server.h"
#include "kube/client.h"
#include "kube/issuer_keys.h"
#include "metrics/prometheus_registry.h"
#include "sidecar/app_api.h"
#include "sidecar/app_host.h"
#include "sidecar/config.h"
#include "sidecar/drain_endpoint.h"
#include "sidecar/drainer.h"
#include "sidecar/entity_registry.h"
#include "sidecar/identity.h"
#include "sidecar/lease_keeper.h"
#include "sidecar/manager_client.h"
#include "sidecar/map_applier.h"
#include "sidecar/map_poller.h"
#include "sidecar/map_watcher.h"
#include "sidecar/peer_api.h"
#include "sidecar/peer_http_client.h"
#include "sidecar/registrar.h"
#include "sidecar/remembered_entities.h"
#include "sidecar/request_authorizer.h"
#include "sidecar/router.h"
#include "sidecar/routing_table.h"
#include "sidecar/sidecar_metrics.h"
#include "sidecar/singleton_keeper.h"
#include "sidecar/token_authorizer.h"
#include "sidecar/topic_api.h"
#include "sidecar/topic_delivery.h"
#include "sidecar/topic_publisher.h"

namespace kshard::sidecar {

class SidecarServer {
 public:
  // Builds every part. `cfg` has passed SidecarConfig::validate(); `self` is its identity with
  // this process's incarnation. Errors are logged here; InvalidArgument when a file or value
  // an option names is unusable (the binary exits 2), another code when a part cannot be made.
  [[nodiscard]] static StatusOr<std::unique_ptr<SidecarServer>> build(const SidecarConfig& cfg,
                                                                      Identity self, Logger log);
  ~SidecarServer();
  SidecarServer(const SidecarServer&) = delete;
  SidecarServer& operator=(const SidecarServer&) = delete;

  // Starts the servers (an error when one cannot listen), then the ShardMap source and the
  // registration. Once.
  [[nodiscard]] Status start();
  // Empty when ready; otherwise why not, as /readyz answers it.
  std::string notReadyReason() const;
  // The process is stopping: hands the shards back, then runs `done` (on another thread) with
  // the drain's outcome. At once, with OK, when this pod never registered: nothing to hand off.
  // A drain that is over stays so (no undo, unlike one the preStop hook started).
  void drain(std::function<void(Status)> done);
  // Stops every part, the app API last but one (its requests in flight are answered, retried
  // until the ShardMap's sendTimeout at most). After drain(); idempotent.
  void stop();

 private:
  SidecarServer(const SidecarConfig& cfg, Identity self, Logger log);
  Status buildRouting();
  Status buildKubeAccess();
  void buildRemembered();
  Status buildLifecycle();
  Status buildServers();
  Status buildMapSource();
  StatusOr<std::unique_ptr<http::Client>> makeClient(http::ClientOptions options,
                                                     bool channels) const;
  // For the clients made later, when a peer or manager address first appears: exits the
  // process when the client cannot be made (an address no client accepts).
  std::unique_ptr<http::Client> peerClientOrExit(const std::string& baseUrl, bool channels) const;
  Logger part(const char* name) const { return log_.withFields({{"part", name}}); }

  const SidecarConfig cfg_;
  const Identity self_;
  const Logger log_;
  const http::Backend backend_;
  metrics::PrometheusRegistry registry_;
  SidecarMetrics metrics_;
  ThreadScheduler scheduler_;
  SeededRandom random_;
  // One set of I/O threads for the app and peer APIs and every client of the data path, so that
  // a forwarded message is received, sent on and answered without a hand-off between threads
  // (see http/io_threads.h). Declared before everything that runs on it. cpprestsdk has its own
  // pool.
  std::unique_ptr<http::IoThreads> ioThreads_;
  std::unique_ptr<http::Client> appClient_;
  std::unique_ptr<AppHost> appHost_;
  std::unique_ptr<EntityRegistry> entities_;
  RoutingTable table_;
  // This pod's projected tokens, one per direction (protocol/audiences.h): for the manager API,
  // and for the other sidecars of its ShardMap. Neither is any good to the other party.
  std::function<std::string()> managerAuthorization_;
  std::function<std::string()> peerAuthorization_;
  std::unique_ptr<PeerHttpClient> peers_;
  std::unique_ptr<ManagerClient> manager_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<TopicDelivery> topicDelivery_;
  std::unique_ptr<TopicPublisher> topicPublisher_;
  std::unique_ptr<Drainer> drainer_;
  // The Kubernetes API: the ShardMap watch and the service-account issuer keys.
  std::unique_ptr<http::Client> kubeTransport_;
  std::unique_ptr<kube::Client> api_;
  std::unique_ptr<ApiServerIssuerKeys> issuerKeys_;
  FixedIssuerKeys fixedKeys_;
  std::unique_ptr<RequestAuthorizer> authorizer_;
  // The remembered entities' records (with an API server only): the registry's recorder.
  std::unique_ptr<RememberedEntities> remembered_;
  std::unique_ptr<MapApplier> applier_;
  std::unique_ptr<SingletonKeeper> singletons_;  // follows the applier's specs
  std::unique_ptr<LeaseKeeper> leaseKeeper_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<http::Server> appServer_;
  std::unique_ptr<AppApi> appApi_;
  std::unique_ptr<PeerApi> peerApi_;
  std::unique_ptr<TopicApi> topicApi_;
  std::unique_ptr<http::Server> peerServer_;
  std::unique_ptr<http::Server> adminServer_;
  std::unique_ptr<DrainEndpoint> drainEndpoint_;
  std::unique_ptr<MapWatcher> watcher_;
  std::unique_ptr<MapPoller> poller_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace kshard::sidecar
