// OperatorServer: one replica of kshard-operator, its parts wired together (docs/operator.md):
// the informers of ShardMaps and labelled pods, leader election, the ShardManager with its
// controllers, the pod provisioner, and three servers: admin (:7202), the manager API (:7200)
// and the sidecar-injection webhook (:9443, TLS, when certificates are configured).
//
// Its life, as kshard-operator's main runs it:
//   build          every part; nothing runs yet;
//   start          the admin server, the informers (waited for up to 60 s), the manager API and
//                  the webhook;
//   joinElection   once the informers have synced: only with a synced cache may this replica
//                  lead (a takeover reads pod health from it);
//   drain          on SIGTERM: stops leading (the controllers stop at their next step) and
//                  releases the Lease, so that a successor takes over within a retry period;
//   stop           stops the servers and the informers.
// Readiness (/readyz on the admin port, notReadyReason) is true once both informers have
// synced and the manager API serves.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "base/status.h"
#include "http/client.h"
#include "http/server.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/issuer_keys.h"
#include "kube/leader_election.h"
#include "kube/service_account_tokens.h"
#include "kube/token_source.h"
#include "kube/token_verifier.h"
#include "metrics/prometheus_registry.h"
#include "operator/admission_webhook.h"
#include "operator/certificate_watcher.h"
#include "operator/config.h"
#include "operator/http_pod_client.h"
#include "operator/injection_config.h"
#include "operator/kube_adapters.h"
#include "operator/kube_clients.h"
#include "operator/manager_api.h"
#include "operator/operator_metrics.h"
#include "operator/pod_authenticator.h"
#include "operator/pod_provisioner.h"
#include "operator/restartable_server.h"
#include "operator/shard_manager.h"
#include "operator/sidecar_injector.h"

namespace kshard::manager {

// How the operator reaches the Kubernetes API (from kube::loadConfig): the transport, which
// must outlive the server, and what every request carries.
struct KubeAccess {
  http::Client& transport;
  std::shared_ptr<kube::TokenSource> token;  // null: no bearer token
  std::string pathPrefix;
};

class OperatorServer {
 public:
  // Builds every part. `cfg` has passed OperatorConfig::finalize(). Errors are logged here;
  // InvalidArgument when the configuration contradicts itself (the binary exits 2), another
  // code when a file it names cannot be loaded.
  [[nodiscard]] static StatusOr<std::unique_ptr<OperatorServer>> build(const OperatorConfig& cfg,
                                                                       const Logger& log,
                                                                       const KubeAccess& kube);
  ~OperatorServer();
  OperatorServer(const OperatorServer&) = delete;
  OperatorServer& operator=(const OperatorServer&) = delete;

  // Starts the admin server, the informers (waiting up to `syncTimeout` for their caches; past
  // it, goes on: leadership waits for the cache), the manager API and the webhook. An error
  // when a server cannot listen.
  [[nodiscard]] Status start(Duration syncTimeout = std::chrono::seconds(60));
  // Both informers have synced.
  bool synced() const;
  // Campaigns for the Lease; call once synced().
  [[nodiscard]] Status joinElection();
  // Empty when ready; otherwise why not, as /readyz answers it.
  std::string notReadyReason() const;
  // Stops leading and releases the Lease (waiting up to the renew deadline), then stops the
  // controllers.
  void drain();
  // Stops the servers and the informers. After drain().
  void stop();

 private:
  OperatorServer(const OperatorConfig& cfg, const Logger& log, const KubeAccess& kube,
                 InjectionConfig injection);
  kube::LeaderCallbacks leaderCallbacks();
  void wireInformers();
  void wireServers();
  void wireWebhook();

  const OperatorConfig cfg_;
  const Logger log_;
  SystemClock& clock_;
  const std::uint64_t seed_;
  // Each component that draws randomness gets its own generator (they are not shared between
  // locks).
  SeededRandom informerRandom_;
  SeededRandom podInformerRandom_;
  SeededRandom electorRandom_;
  SeededRandom plannerRandom_;
  ThreadScheduler kubeScheduler_;
  KubeClients clients_;
  kube::Client& api_;
  metrics::PrometheusRegistry registry_;
  OperatorMetrics metrics_;
  kube::Informer shardMapInformer_;
  kube::Informer podInformer_;
  KubeShardMapStore store_;
  KubePodDirectory directory_;
  kube::EventRecorder recorder_;
  KubeEventSink events_;
  // The operator's credentials for each ShardMap's sidecars: a token whose only audience names
  // that map (protocol/audiences.h), so that what a pod receives opens no other map's sidecars.
  kube::ServiceAccountTokens sidecarTokens_;
  HttpPodClient podClient_;
  std::shared_ptr<PodProvisioner> provisioner_;
  // Destruction runs bottom-up: the elector goes first (no callback after it), then the
  // manager and its controllers, then their strand, then the adapters they use.
  LeaseLeadership leadership_;
  ThreadScheduler controllerScheduler_;  // the controllers' strand: one thread
  ShardManager manager_;
  kube::LeaderElector elector_;
  std::unique_ptr<http::Server> admin_;
  std::atomic<bool> managerServing_{false};
  std::unique_ptr<http::Server> managerServer_;
  // Callers' tokens are verified locally against the issuer's keys before any TokenReview.
  kube::ApiServerIssuerKeys issuerKeys_;
  kube::TokenVerifier tokenVerifier_;
  std::unique_ptr<TokenReviewAuthenticator> podAuthenticator_;
  ManagerApi managerApi_;
  SidecarInjector injector_;
  const AdmissionWebhook admission_;
  // The webhook's server reads its certificate when it starts: when cert-manager renews it, the
  // watcher starts a fresh server with the new files.
  std::unique_ptr<RestartableServer> webhook_;
  std::unique_ptr<CertificateWatcher> certificateWatcher_;
  ThreadScheduler certificateScheduler_;  // its own thread: a restart may wait 1 s
};

}  // namespace kshard::manager
