#include "operator/operator_server.h"

#include <future>

#include "http/admin_routes.h"
#include "http/factory.h"
#include "operator/pod_directory.h"
#include "sharding/shard_map_json.h"
#include "sharding/shard_map_segments.h"

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

kube::InformerOptions shardMapInformerOptions(const OperatorConfig& cfg) {
  kube::InformerOptions o;
  o.resource = kShardMapResource;
  o.ns = cfg.watchNamespace;
  o.transform = kube::stripManagedFields;
  return o;
}

kube::InformerOptions podInformerOptions(const OperatorConfig& cfg) {
  kube::InformerOptions o;
  o.resource = kube::resources::kPods;
  o.ns = cfg.watchNamespace;
  o.labelSelector = kShardMapLabel;
  o.transform = slimPodObject;
  // A list page is parsed whole before the transform slims it: 500 pods as a JSON DOM are tens
  // of MiB, which the heap keeps afterwards. 100 a page bounds that peak.
  o.pageSize = 100;
  return o;
}

PodProvisionerOptions provisionerOptions(const OperatorConfig& cfg) {
  return {.createShardMaps = cfg.createShardMaps,
          .defaultShards = static_cast<std::int32_t>(cfg.defaultShards),
          .maxShardMapsPerNamespace = static_cast<std::size_t>(cfg.maxShardMapsPerNamespace),
          .manageRbac = cfg.manageRbac,
          .clusterRole = cfg.sidecarClusterRole,
          .roleBindingName = cfg.sidecarRoleBinding};
}

kube::LeaderElectionConfig electionConfig(const OperatorConfig& cfg) {
  return {.leaseNamespace = cfg.leaseNamespace,
          .leaseName = cfg.leaseName,
          .identity = cfg.podName,
          .leaseDuration = cfg.leaseDuration,
          .renewDeadline = cfg.renewDeadline,
          .retryPeriod = cfg.retryPeriod};
}

kube::EventRecorderOptions eventOptions(const OperatorConfig& cfg) {
  return {.reportingController = "kshard.io/operator", .reportingInstance = cfg.podName};
}

// The injection configuration the webhook uses: the file's, completed from the flags.
StatusOr<InjectionConfig> injectionConfig(const OperatorConfig& cfg, const Logger& log) {
  InjectionConfig injection;
  if (!cfg.injectionConfigFile.empty()) {
    auto loaded = loadInjectionConfig(cfg.injectionConfigFile);
    if (!loaded.ok()) {
      log.error("cannot load the injection configuration", {{"error", loaded.status().toString()}});
      return Status(StatusCode::kFailedPrecondition, loaded.status().message());
    }
    injection = std::move(*loaded);
  }
  injection.unregisterHoldSeconds =
      std::chrono::ceil<std::chrono::seconds>(cfg.maxUnregisterHold).count();
  if (injection.peerAuth == "token") {
    if (cfg.sidecarAuth == "none") {
      const char* message =
          "the injected sidecars would refuse the operator: the injection configuration "
          "asks for peerAuth token, and --sidecar-auth=none sends them no token";
      log.error(message);
      return invalidArgument(message);
    }
    if (injection.operatorIdentity.empty()) {
      injection.operatorIdentity =
          "system:serviceaccount:" + cfg.podNamespace + ":" + cfg.serviceAccount;
    }
  }
  return injection;
}

}  // namespace

StatusOr<std::unique_ptr<OperatorServer>> OperatorServer::build(const OperatorConfig& cfg,
                                                                const Logger& log,
                                                                const KubeAccess& kube) {
  auto injection = injectionConfig(cfg, log);
  if (!injection.ok()) return injection.status();
  return std::unique_ptr<OperatorServer>(new OperatorServer(cfg, log, kube, std::move(*injection)));
}

OperatorServer::OperatorServer(const OperatorConfig& cfg, const Logger& log, const KubeAccess& kube,
                               InjectionConfig injection)
    : cfg_(cfg),
      log_(log),
      clock_(SystemClock::instance()),
      seed_(seedFrom(cfg.seed)),
      informerRandom_(seed_ + 1),
      podInformerRandom_(seed_ + 2),
      electorRandom_(seed_ + 3),
      plannerRandom_(seed_ + 4),
      kubeScheduler_(clock_),
      clients_(kube.transport, kubeScheduler_, log_,
               {.userAgent = kUserAgent,
                .qps = cfg.kubeQps,
                .burst = static_cast<int>(cfg.kubeBurst),
                .seed = seed_ + 5},
               kube.token, kube.pathPrefix),
      api_(clients_.api()),
      metrics_(registry_),
      shardMapInformer_(api_, kubeScheduler_, informerRandom_, log_, shardMapInformerOptions(cfg)),
      podInformer_(api_, kubeScheduler_, podInformerRandom_, log_, podInformerOptions(cfg)),
      store_(api_, kubeScheduler_, log_,
             {.inlineBytes = static_cast<std::size_t>(cfg.statusInlineBytes),
              .segmentBytes = static_cast<std::size_t>(cfg.segmentBytes)}),
      directory_(api_, podInformer_, clock_),
      recorder_(api_, kubeScheduler_, log_, eventOptions(cfg)),
      events_(recorder_),
      sidecarTokens_(api_, clock_,
                     {cfg.podNamespace, cfg.serviceAccount, cfg.sidecarTokenLifetime}),
      podClient_([backend = *http::parseBackend(cfg.httpBackend)](
                     http::ClientOptions o) { return http::makeClient(backend, std::move(o)); },
                 cfg.podConnectTimeout,
                 cfg.sidecarAuth == "tokenrequest" ? sidecarTokenCredentials(sidecarTokens_)
                                                   : HttpPodClient::Credentials{}),
      provisioner_(std::make_shared<PodProvisioner>(api_, podInformer_, shardMapInformer_,
                                                    recorder_, log_, provisionerOptions(cfg))),
      leadership_(cfg.podName),
      controllerScheduler_(clock_),
      manager_(ControllerDeps{controllerScheduler_, plannerRandom_, store_, podClient_, directory_,
                              leadership_, events_, metrics_, log_,
                              sharding::ManagerRef{cfg.podName, cfg.advertiseAddress},
                              cfg.maxUnregisterHold}),
      elector_(clients_.election(), kubeScheduler_, electorRandom_, log_, electionConfig(cfg),
               leaderCallbacks()),
      issuerKeys_(clients_.reviews(), kubeScheduler_, log_),
      tokenVerifier_(issuerKeys_, clock_, {.audience = kTokenAudience}),
      // The sidecars' tokens for the operator (audience kshard.io/operator): a token a pod sends
      // its peers, or one for any other party, is refused.
      podAuthenticator_(cfg.podAuth == "tokenreview"
                            ? std::make_unique<TokenReviewAuthenticator>(clients_.reviews(), clock_,
                                                                         &tokenVerifier_)
                            : nullptr),
      managerApi_(manager_, leadership_, metrics_, clock_, log_, podAuthenticator_.get()),
      // The ShardMap spec from the informer's cache: the injected sidecar follows its
      // versionLabel, the grace period its handoffTimeout. A pod created before its ShardMap
      // gets the defaults.
      injector_(
          std::move(injection),
          [this](const std::string& ns,
                 const std::string& name) -> std::optional<sharding::ShardMapSpec> {
            kube::ObjectPtr object = shardMapInformer_.store().get(ns, name);
            if (!object) return std::nullopt;
            auto map = sharding::shardMapFromJson(sharding::withoutSegments(*object));
            if (!map.ok()) return std::nullopt;
            return map->spec;
          },
          log_),
      admission_(injector_),
      certificateScheduler_(clock_) {
  if (cfg.sidecarAuth != "tokenrequest") {
    log_.warn("the operator sends no credentials to the sidecars (--sidecar-auth=none)");
  }
  metrics_.setLeader(false);
  wireInformers();
  wireServers();
  wireWebhook();
}

OperatorServer::~OperatorServer() = default;

// The elector logs the transitions itself.
kube::LeaderCallbacks OperatorServer::leaderCallbacks() {
  kube::LeaderCallbacks callbacks;
  callbacks.onStartedLeading = [this] {
    leadership_.setLeading(true);
    manager_.startLeading();
    provisioner_->startLeading();
  };
  callbacks.onStoppedLeading = [this] {
    // Epoch rule 7: cleared before anything else, so a step in progress sees it at once.
    leadership_.setLeading(false);
    manager_.stopLeading();
    provisioner_->stopLeading();
  };
  callbacks.onNewLeader = [this](const std::string& id) { leadership_.setHolder(id); };
  callbacks.onRenewed = [this](SteadyTime at) { leadership_.setRenewed(at); };
  return callbacks;
}

// The informers' handlers: decode, then route to the ShardManager and the provisioner.
void OperatorServer::wireInformers() {
  // A segmented status comes without its pods and assignments: followers mirror the rest, and
  // the leader reads the whole map from the store before it acts.
  auto upsert = [this](const nlohmann::json& object) {
    auto map = sharding::shardMapFromJson(sharding::withoutSegments(object));
    if (!map.ok()) {
      log_.error("ignoring an invalid ShardMap", {{"error", map.status().toString()}});
      return;
    }
    manager_.upsert(std::move(*map));
  };
  shardMapInformer_.addHandler(
      {.onAdd = [upsert](const nlohmann::json& o, bool) { upsert(o); },
       .onUpdate = [upsert](const nlohmann::json&, const nlohmann::json& o) { upsert(o); },
       .onDelete =
           [this](const nlohmann::json& last, bool) {
             const auto& meta = last.value("metadata", nlohmann::json::object());
             manager_.remove({meta.value("namespace", ""), meta.value("name", "")});
           }});
  auto podEvent = [this](const nlohmann::json& object, bool gone) {
    auto pod = podInfoFromJson(object);
    if (!pod.ok()) return;
    auto label = pod->labels.find(kShardMapLabel);
    if (label != pod->labels.end()) manager_.podChanged(pod->namespace_, label->second, pod->name);
    if (gone) {
      provisioner_->podGone(pod->namespace_);
    } else {
      provisioner_->podSeen(*pod);
    }
  };
  podInformer_.addHandler(
      {.onAdd = [podEvent](const nlohmann::json& o, bool) { podEvent(o, false); },
       .onUpdate = [podEvent](const nlohmann::json&,
                              const nlohmann::json& o) { podEvent(o, false); },
       .onDelete =
           [this, podEvent](const nlohmann::json& last, bool finalStateUnknown) {
             // Kept first: the controllers ask how the pod ended when they hear of it.
             directory_.deleted(last, finalStateUnknown);
             podEvent(last, true);
           }});
}

// Admin (:7202) and the manager API (:7200).
void OperatorServer::wireServers() {
  admin_ = makeServerOn(cfg_.adminListen, 1, kAdminLimits, log_);
  http::addAdminRoutes(*admin_, registry_, [this] { return notReadyReason(); });
  managerServer_ =
      makeServerOn(cfg_.managerListen, static_cast<int>(cfg_.ioThreads), kManagerLimits, log_);
  if (!podAuthenticator_) {
    log_.warn("the manager API does not authenticate its callers (--pod-auth=none)");
  }
  if (cfg_.sidecarAuth == "tokenrequest") {
    managerApi_.setAnswerCredentials(
        sidecarTokenCredentials(sidecarTokens_, &protocol::mapAnswerAudience));
  }
  managerApi_.addRoutes(*managerServer_);
}

// The mutating webhook (sidecar injection) is served by every replica on its own TLS port, so
// pod creation does not depend on the leader. Without certificates the port stays closed.
void OperatorServer::wireWebhook() {
  if (cfg_.webhookCertFile.empty()) return;
  webhook_ = std::make_unique<RestartableServer>(
      [this] {
        http::TlsServerOptions tls;
        tls.certFile = cfg_.webhookCertFile;
        tls.keyFile = cfg_.webhookKeyFile;
        auto server = makeServerOn(cfg_.webhookListen, 2, kWebhookLimits, log_, std::move(tls));
        admission_.addRoutes(*server);
        return server;
      },
      log_);
  certificateWatcher_ = std::make_unique<CertificateWatcher>(
      certificateScheduler_, log_,
      CertificateWatcher::Options{cfg_.webhookCertFile, cfg_.webhookKeyFile},
      [this] { return webhook_->restart().ok(); });
}

Status OperatorServer::start(Duration syncTimeout) {
  if (Status s = admin_->start(); !s.ok()) {
    log_.error("cannot start the admin server", {{"error", s.toString()}});
    return s;
  }
  if (podAuthenticator_) issuerKeys_.start();
  shardMapInformer_.start();
  podInformer_.start();
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(syncTimeout);
  if (!shardMapInformer_.waitForSync(wait) || !podInformer_.waitForSync(wait)) {
    log_.warn("informers did not sync in time; continuing (leadership waits for the cache)",
              {{"timeout_ms", wait.count()}});
  }
  if (Status s = managerServer_->start(); !s.ok()) {
    log_.error("cannot start the manager API", {{"error", s.toString()}});
    return s;
  }
  managerServing_ = true;
  if (webhook_) {
    if (Status s = webhook_->start(); !s.ok()) {
      log_.error("cannot start the webhook server", {{"error", s.toString()}});
      return s;
    }
    certificateWatcher_->start();
  }
  return Status();
}

bool OperatorServer::synced() const {
  return shardMapInformer_.hasSynced() && podInformer_.hasSynced();
}

Status OperatorServer::joinElection() {
  if (Status s = elector_.start(); !s.ok()) {
    log_.error("cannot start leader election", {{"error", s.toString()}});
    return s;
  }
  log_.info("kshard-operator started", {{"manager", cfg_.advertiseAddress},
                                        {"admin", cfg_.adminListen},
                                        {"lease", cfg_.leaseNamespace + "/" + cfg_.leaseName}});
  return Status();
}

std::string OperatorServer::notReadyReason() const {
  if (!shardMapInformer_.hasSynced()) return "the ShardMap informer has not synced";
  if (!podInformer_.hasSynced()) return "the pod informer has not synced";
  if (!managerServing_) return "the manager API is not serving";
  return {};
}

void OperatorServer::drain() {
  // Shared: the elector may release the Lease after the wait gave up.
  auto released = std::make_shared<std::promise<void>>();
  elector_.stop([released] { released->set_value(); });
  released->get_future().wait_for(cfg_.renewDeadline);
  manager_.shutdown();
}

void OperatorServer::stop() {
  managerServer_->stop(std::chrono::milliseconds(2000));
  if (certificateWatcher_) certificateWatcher_->stop();
  if (webhook_) webhook_->stop();
  podInformer_.stop();
  shardMapInformer_.stop();
  issuerKeys_.stop();
  admin_->stop();
}

}  // namespace kshard::manager
