// kshard-operator: the Shard Manager. Watches ShardMaps and the pods labelled for them, elects one
// leader among its replicas with a Lease, and on the leader runs the rebalance workflow and the
// manager API. See docs/operator.md.
#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <memory>

#include "base/logger.h"
#include "base/options.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "http/admin_routes.h"
#include "http/factory.h"
#include "kube/client.h"
#include "kube/config.h"
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
#include "operator/kube_adapters.h"
#include "operator/kube_clients.h"
#include "operator/manager_api.h"
#include "operator/operator_metrics.h"
#include "operator/pod_authenticator.h"
#include "operator/pod_provisioner.h"
#include "operator/restartable_server.h"
#include "operator/shard_manager.h"
#include "operator/sidecar_injector.h"
#include "protocol/audiences.h"
#include "sharding/shard_map_json.h"

namespace kshard::manager {
namespace {

constexpr char kUserAgent[] = "kshard-operator/" KSHARD_VERSION;

std::uint64_t seedFrom(std::int64_t configured) {
  if (configured != 0) return static_cast<std::uint64_t>(configured);
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// The operator's servers: always Beast, whatever --http-backend says (which picks the clients to
// the sidecars), because only the Beast adapter bounds connections and has a header and idle
// timeout (docs/decisions/0004-operator-servers-on-beast.md). Each is bounded before anyone is
// authenticated: at most `maxConnections` connections, `maxConnectionsPerPeer` from one address,
// and bodies of `maxBodyBytes` (routes may take less), refused from their Content-Length.
struct ServerLimits {
  std::size_t maxBodyBytes;
  std::size_t maxConnections;
  std::size_t maxConnectionsPerPeer;
};
// Scrapes and probes: no bodies, a few connections from the node and the monitoring.
constexpr ServerLimits kAdminLimits{4096, 64, 16};
// Every sidecar keeps a connection to the leader (it renews its ownership lease every 10 s,
// within the client's idle timeout), so the cap must exceed the pods of every ShardMap: an idle
// connection costs about 10 KiB, one reading a body 16 KiB more. From one address at most 64 (a
// test harness registering many pods from one process uses up to 50).
constexpr ServerLimits kManagerLimits{ManagerApi::kMaxBodyBytes, 8192, 64};
// The API servers call every replica's webhook; a review takes a millisecond, so a few
// connections carry thousands a second. 32 bodies of 4 MiB stay within the chart's 256 MiB.
constexpr ServerLimits kWebhookLimits{AdmissionWebhook::kMaxBodyBytes, 32, 0};

std::unique_ptr<http::Server> makeServerOn(const std::string& listen, int threads,
                                           const ServerLimits& limits, const Logger& log,
                                           std::optional<http::TlsServerOptions> tls = {}) {
  auto hp = splitHostPort(listen);
  http::ServerOptions options;
  options.host = hp->first;
  options.port = hp->second;
  options.threads = threads;
  options.maxBodyBytes = limits.maxBodyBytes;
  options.maxConnections = limits.maxConnections;
  options.maxConnectionsPerPeer = limits.maxConnectionsPerPeer;
  options.tls = std::move(tls);
  options.logger = log;
  return http::makeServer(http::Backend::kBeast, std::move(options));
}

// The informers' handlers: decode, then route to the ShardManager and the provisioner.
void wireInformers(kube::Informer& shardMaps, kube::Informer& pods, ShardManager& manager,
                   PodProvisioner& provisioner, KubePodDirectory& directory, const Logger& log) {
  auto upsert = [&manager, log](const nlohmann::json& object) {
    auto map = sharding::shardMapFromJson(object);
    if (!map.ok()) {
      log.error("ignoring an invalid ShardMap", {{"error", map.status().toString()}});
      return;
    }
    manager.upsert(std::move(*map));
  };
  shardMaps.addHandler(
      {.onAdd = [upsert](const nlohmann::json& o, bool) { upsert(o); },
       .onUpdate = [upsert](const nlohmann::json&, const nlohmann::json& o) { upsert(o); },
       .onDelete =
           [&manager](const nlohmann::json& last, bool) {
             const auto& meta = last.value("metadata", nlohmann::json::object());
             manager.remove({meta.value("namespace", ""), meta.value("name", "")});
           }});
  auto podEvent = [&manager, &provisioner](const nlohmann::json& object, bool gone) {
    auto pod = podInfoFromJson(object);
    if (!pod.ok()) return;
    auto label = pod->labels.find(kShardMapLabel);
    if (label != pod->labels.end()) manager.podChanged(pod->namespace_, label->second, pod->name);
    if (gone) {
      provisioner.podGone(pod->namespace_);
    } else {
      provisioner.podSeen(*pod);
    }
  };
  pods.addHandler({.onAdd = [podEvent](const nlohmann::json& o, bool) { podEvent(o, false); },
                   .onUpdate = [podEvent](const nlohmann::json&,
                                          const nlohmann::json& o) { podEvent(o, false); },
                   .onDelete =
                       [podEvent, &directory](const nlohmann::json& last, bool finalStateUnknown) {
                         // Kept first: the controllers ask how the pod ended when they hear of it.
                         directory.deleted(last, finalStateUnknown);
                         podEvent(last, true);
                       }});
}

int run(int argc, char** argv) {
  OperatorConfig cfg;
  OptionSet opts("kshard-operator",
                 "The Shard Manager of kshard: assigns the shards of every ShardMap to its pods.");
  cfg.declare(opts);
  auto outcome = opts.parse(argc, argv);
  if (!outcome.ok()) {
    std::cerr << "kshard-operator: " << outcome.status().message() << "\n";
    return 2;
  }
  if (*outcome == OptionSet::Outcome::kHelp) {
    std::cout << opts.usage();
    return 0;
  }
  if (Status s = cfg.finalize(); !s.ok()) {
    std::cerr << "kshard-operator: " << s.message() << "\n";
    return 2;
  }
  LogLevel level = LogLevel::kInfo;
  parseLogLevel(cfg.logLevel, level);
  Logger log("operator", level);
  log = log.withFields({{"replica", cfg.podName}});

  // Signals are taken by sigwait below; every thread started from here on inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  SystemClock& clock = SystemClock::instance();
  const std::uint64_t seed = seedFrom(cfg.seed);
  // Each component that draws randomness gets its own generator (they are not shared between
  // locks).
  SeededRandom informerRandom(seed + 1), podInformerRandom(seed + 2), electorRandom(seed + 3),
      plannerRandom(seed + 4);
  ThreadScheduler kubeScheduler(clock);

  auto kubeConfig = kube::loadConfig({cfg.kubeconfig, cfg.kubeContext}, clock);
  if (!kubeConfig.ok()) {
    log.error("cannot load the Kubernetes configuration",
              {{"error", kubeConfig.status().toString()}});
    return 1;
  }
  log.info("kubernetes configuration", {{"source", kubeConfig->source}});
  const http::Backend backend = *http::parseBackend(cfg.httpBackend);
  auto transport =
      http::makeClient(http::Backend::kCppRest, kube::httpClientOptions(*kubeConfig, kUserAgent));
  if (!transport.ok()) {
    log.error("cannot create the Kubernetes client", {{"error", transport.status().toString()}});
    return 1;
  }
  KubeClients clients(**transport, kubeScheduler, log,
                      {.userAgent = kUserAgent,
                       .qps = cfg.kubeQps,
                       .burst = static_cast<int>(cfg.kubeBurst),
                       .seed = seed + 5},
                      kubeConfig->token, kubeConfig->pathPrefix);
  kube::Client& api = clients.api();

  metrics::PrometheusRegistry registry;
  OperatorMetrics metrics(registry);
  metrics.setLeader(false);

  kube::InformerOptions shardMapOptions;
  shardMapOptions.resource = kShardMapResource;
  shardMapOptions.ns = cfg.watchNamespace;
  shardMapOptions.transform = kube::stripManagedFields;
  kube::Informer shardMapInformer(api, kubeScheduler, informerRandom, log, shardMapOptions);
  kube::InformerOptions podOptions;
  podOptions.resource = kube::resources::kPods;
  podOptions.ns = cfg.watchNamespace;
  podOptions.labelSelector = kShardMapLabel;
  podOptions.transform = slimPodObject;
  // A list page is parsed whole before the transform slims it: 500 pods as a JSON DOM are tens
  // of MiB, which the heap keeps afterwards. 100 a page bounds that peak.
  podOptions.pageSize = 100;
  kube::Informer podInformer(api, kubeScheduler, podInformerRandom, log, podOptions);

  KubeShardMapStore store(api);
  KubePodDirectory directory(api, podInformer, clock);
  kube::EventRecorderOptions eventOptions;
  eventOptions.reportingController = "kshard.io/operator";
  eventOptions.reportingInstance = cfg.podName;
  kube::EventRecorder recorder(api, kubeScheduler, log, eventOptions);
  KubeEventSink events(recorder);
  // The operator's credentials for each ShardMap's sidecars: a token whose only audience names
  // that map (protocol/audiences.h), so that what a pod receives opens no other map's sidecars.
  kube::ServiceAccountTokens sidecarTokens(
      api, clock, {cfg.podNamespace, cfg.serviceAccount, cfg.sidecarTokenLifetime});
  HttpPodClient::Credentials sidecarCredentials;
  if (cfg.sidecarAuth == "tokenrequest") {
    sidecarCredentials = sidecarTokenCredentials(sidecarTokens);
  } else {
    log.warn("the operator sends no credentials to the sidecars (--sidecar-auth=none)");
  }
  HttpPodClient podClient(
      [backend](http::ClientOptions o) { return http::makeClient(backend, std::move(o)); },
      cfg.podConnectTimeout, std::move(sidecarCredentials));

  PodProvisionerOptions provisionerOptions;
  provisionerOptions.createShardMaps = cfg.createShardMaps;
  provisionerOptions.defaultShards = static_cast<std::int32_t>(cfg.defaultShards);
  provisionerOptions.maxShardMapsPerNamespace =
      static_cast<std::size_t>(cfg.maxShardMapsPerNamespace);
  provisionerOptions.manageRbac = cfg.manageRbac;
  provisionerOptions.clusterRole = cfg.sidecarClusterRole;
  provisionerOptions.roleBindingName = cfg.sidecarRoleBinding;
  auto provisioner = std::make_shared<PodProvisioner>(api, podInformer, shardMapInformer, recorder,
                                                      log, provisionerOptions);

  // Destruction runs bottom-up: the elector goes first (no callback after it), then the
  // manager and its controllers, then their strand, then the adapters they use.
  LeaseLeadership leadership(cfg.podName);
  ThreadScheduler controllerScheduler(clock);  // the controllers' strand: one thread
  ShardManager manager(ControllerDeps{
      controllerScheduler, plannerRandom, store, podClient, directory, leadership, events, metrics,
      log, sharding::ManagerRef{cfg.podName, cfg.advertiseAddress}, cfg.maxUnregisterHold});
  kube::LeaderElectionConfig election;
  election.leaseNamespace = cfg.leaseNamespace;
  election.leaseName = cfg.leaseName;
  election.identity = cfg.podName;
  election.leaseDuration = cfg.leaseDuration;
  election.renewDeadline = cfg.renewDeadline;
  election.retryPeriod = cfg.retryPeriod;
  kube::LeaderCallbacks callbacks;
  // The elector logs the transitions itself.
  callbacks.onStartedLeading = [&] {
    leadership.setLeading(true);
    manager.startLeading();
    provisioner->startLeading();
  };
  callbacks.onStoppedLeading = [&] {
    // Epoch rule 7: cleared before anything else, so a step in progress sees it at once.
    leadership.setLeading(false);
    manager.stopLeading();
    provisioner->stopLeading();
  };
  callbacks.onNewLeader = [&](const std::string& id) { leadership.setHolder(id); };
  callbacks.onRenewed = [&](SteadyTime at) { leadership.setRenewed(at); };
  kube::LeaderElector elector(clients.election(), kubeScheduler, electorRandom, log, election,
                              callbacks);
  wireInformers(shardMapInformer, podInformer, manager, *provisioner, directory, log);

  // Servers: admin (:7202), manager API (:7200), and the webhook (:9443, TLS) when configured.
  auto admin = makeServerOn(cfg.adminListen, 1, kAdminLimits, log);
  bool managerServing = false;
  http::addAdminRoutes(*admin, registry, [&]() -> std::string {
    if (!shardMapInformer.hasSynced()) return "the ShardMap informer has not synced";
    if (!podInformer.hasSynced()) return "the pod informer has not synced";
    if (!managerServing) return "the manager API is not serving";
    return {};
  });
  if (Status s = admin->start(); !s.ok()) {
    log.error("cannot start the admin server", {{"error", s.toString()}});
    return 1;
  }
  auto managerServer =
      makeServerOn(cfg.managerListen, static_cast<int>(cfg.ioThreads), kManagerLimits, log);
  // Callers' tokens are verified locally against the issuer's keys before any TokenReview.
  kube::ApiServerIssuerKeys issuerKeys(clients.reviews(), kubeScheduler, log);
  kube::TokenVerifier tokenVerifier(issuerKeys, clock, {.audience = kTokenAudience});
  std::unique_ptr<TokenReviewAuthenticator> podAuthenticator;
  if (cfg.podAuth == "tokenreview") {
    // The sidecars' tokens for the operator (audience kshard.io/operator): a token a pod sends
    // its peers, or one for any other party, is refused.
    issuerKeys.start();
    podAuthenticator =
        std::make_unique<TokenReviewAuthenticator>(clients.reviews(), clock, &tokenVerifier);
  } else {
    log.warn("the manager API does not authenticate its callers (--pod-auth=none)");
  }
  ManagerApi managerApi(manager, leadership, metrics, clock, log, podAuthenticator.get());
  managerApi.addRoutes(*managerServer);
  // The mutating webhook (sidecar injection) is served by every replica on its own TLS port, so
  // pod creation does not depend on the leader. Without certificates the port stays closed.
  InjectionConfig injection;
  if (!cfg.injectionConfigFile.empty()) {
    auto loaded = loadInjectionConfig(cfg.injectionConfigFile);
    if (!loaded.ok()) {
      log.error("cannot load the injection configuration", {{"error", loaded.status().toString()}});
      return 1;
    }
    injection = std::move(*loaded);
  }
  injection.unregisterHoldSeconds =
      std::chrono::ceil<std::chrono::seconds>(cfg.maxUnregisterHold).count();
  if (injection.peerAuth == "token") {
    if (cfg.sidecarAuth == "none") {
      log.error(
          "the injected sidecars would refuse the operator: the injection configuration "
          "asks for peerAuth token, and --sidecar-auth=none sends them no token");
      return 2;
    }
    if (injection.operatorIdentity.empty()) {
      injection.operatorIdentity =
          "system:serviceaccount:" + cfg.podNamespace + ":" + cfg.serviceAccount;
    }
  }
  // The ShardMap spec from the informer's cache: the injected sidecar follows its versionLabel,
  // the grace period its handoffTimeout. A pod created before its ShardMap gets the defaults.
  SidecarInjector injector(
      std::move(injection),
      [&shardMapInformer](const std::string& ns,
                          const std::string& name) -> std::optional<sharding::ShardMapSpec> {
        kube::ObjectPtr object = shardMapInformer.store().get(ns, name);
        if (!object) return std::nullopt;
        auto map = sharding::shardMapFromJson(*object);
        if (!map.ok()) return std::nullopt;
        return map->spec;
      },
      log);
  const AdmissionWebhook admission(injector);
  // The webhook's server reads its certificate when it starts: when cert-manager renews it, the
  // watcher starts a fresh server with the new files.
  std::unique_ptr<RestartableServer> webhook;
  std::unique_ptr<CertificateWatcher> certificateWatcher;
  ThreadScheduler certificateScheduler(clock);  // its own thread: a restart may wait 1 s
  if (!cfg.webhookCertFile.empty()) {
    webhook = std::make_unique<RestartableServer>(
        [&cfg, &admission, &log] {
          http::TlsServerOptions tls;
          tls.certFile = cfg.webhookCertFile;
          tls.keyFile = cfg.webhookKeyFile;
          auto server = makeServerOn(cfg.webhookListen, 2, kWebhookLimits, log, std::move(tls));
          admission.addRoutes(*server);
          return server;
        },
        log);
    certificateWatcher = std::make_unique<CertificateWatcher>(
        certificateScheduler, log,
        CertificateWatcher::Options{cfg.webhookCertFile, cfg.webhookKeyFile},
        [&webhook] { return webhook->restart().ok(); });
  }

  shardMapInformer.start();
  podInformer.start();
  if (!shardMapInformer.waitForSync(std::chrono::seconds(60)) ||
      !podInformer.waitForSync(std::chrono::seconds(60))) {
    log.warn("informers did not sync within 60 s; continuing (leadership waits for the cache)");
  }
  if (Status s = managerServer->start(); !s.ok()) {
    log.error("cannot start the manager API", {{"error", s.toString()}});
    return 1;
  }
  managerServing = true;
  if (webhook) {
    if (Status s = webhook->start(); !s.ok()) {
      log.error("cannot start the webhook server", {{"error", s.toString()}});
      return 1;
    }
    certificateWatcher->start();
  }
  // Only with a synced cache may this replica lead: takeover reads pod health from it.
  while (!shardMapInformer.hasSynced() || !podInformer.hasSynced()) {
    int sig = 0;
    timespec wait{1, 0};
    sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT) return 0;
  }
  if (Status s = elector.start(); !s.ok()) {
    log.error("cannot start leader election", {{"error", s.toString()}});
    return 1;
  }
  log.info("kshard-operator started", {{"manager", cfg.advertiseAddress},
                                       {"admin", cfg.adminListen},
                                       {"lease", cfg.leaseNamespace + "/" + cfg.leaseName}});

  // Wait for a signal; meanwhile give the heap's free pages back every few seconds. Bursts of
  // large JSON documents (a status of 1,000 pods, a thousand registrations at once) leave free
  // memory scattered in the arenas, where it counts as resident until trimmed.
  int sig = 0;
  while (sig != SIGTERM && sig != SIGINT) {
    timespec wait{5, 0};
    sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig < 0) malloc_trim(0);
  }
  log.info("stopping", {{"signal", sig}});
  // Stop leading first (controllers stop at their next step) and release the Lease, so that a
  // successor takes over within a retry period.
  std::promise<void> released;
  elector.stop([&] { released.set_value(); });
  released.get_future().wait_for(cfg.renewDeadline);
  manager.shutdown();
  managerServer->stop(std::chrono::milliseconds(2000));
  if (certificateWatcher) certificateWatcher->stop();
  if (webhook) webhook->stop();
  podInformer.stop();
  shardMapInformer.stop();
  issuerKeys.stop();
  admin->stop();
  return 0;
}

}  // namespace
}  // namespace kshard::manager

int main(int argc, char** argv) {
  // glibc gives each thread that allocates its own arena, up to 8 per core, and freed memory
  // stays in the arena that held it. The operator's threads (HTTP, informers, pod clients) take
  // turns building large JSON documents (a ShardMap status of 1,000 pods is 200 KiB of text), so
  // the peak resident set was the sum of those arenas: 90 MiB with 1,000 pods against 58 MiB
  // with one arena (bench/operator, docs/benchmarks.md). Nothing here is allocation-bound.
  mallopt(M_ARENA_MAX, 2);
  try {
    return kshard::manager::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kshard-operator: fatal: %s\n", e.what());
    return 1;
  }
}
