#include "sidecar/sidecar_server.h"

#include <cstdlib>
#include <random>

#include "base/startup.h"
#include "http/admin_routes.h"
#include "http/channel_client.h"
#include "kube/config.h"
#include "kube/token_source.h"

namespace kshard::sidecar {
namespace {

// Idle keep-alive connections a sidecar keeps to the app and to each peer. Idle connections close
// after the client's idle timeout, so a burst does not hold them for long.
constexpr std::size_t kMaxIdleConnections = 1024;
// The admin server's bounds (/metrics, /healthz, /readyz, /v1/drain): see where they are set.
constexpr std::size_t kAdminMaxBodyBytes = 4096;
constexpr std::size_t kAdminMaxConnections = 64;
constexpr std::size_t kAdminMaxConnectionsPerPeer = 16;

std::chrono::milliseconds ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

// build() keeps InvalidArgument for what an option names (the binary exits 2); any other
// failure to make a part is not the user's input.
Status notConfig(const Status& s) {
  if (s.code() != StatusCode::kInvalidArgument) return s;
  return {StatusCode::kFailedPrecondition, s.message()};
}

}  // namespace

StatusOr<std::unique_ptr<SidecarServer>> SidecarServer::build(const SidecarConfig& cfg,
                                                              Identity self, Logger log) {
  std::unique_ptr<SidecarServer> server(new SidecarServer(cfg, std::move(self), std::move(log)));
  for (auto step : {&SidecarServer::buildRouting, &SidecarServer::buildKubeAccess,
                    &SidecarServer::buildLifecycle, &SidecarServer::buildServers,
                    &SidecarServer::buildMapSource}) {
    if (Status s = (server.get()->*step)(); !s.ok()) return s;
  }
  return server;
}

SidecarServer::SidecarServer(const SidecarConfig& cfg, Identity self, Logger log)
    : cfg_(cfg),
      self_(std::move(self)),
      log_(std::move(log)),
      backend_(*http::parseBackend(cfg.httpBackend)),
      metrics_(registry_),
      random_(std::random_device{}()) {}

SidecarServer::~SidecarServer() { stop(); }

StatusOr<std::unique_ptr<http::Client>> SidecarServer::makeClient(http::ClientOptions options,
                                                                  bool channels) const {
  StatusOr<std::unique_ptr<http::Client>> client =
      channels ? http::makeChannelClient(std::move(options))
               : http::makeClient(backend_, std::move(options));
  if (!client.ok()) {
    log_.error("cannot create HTTP client", {{"error", client.status().toString()}});
    return notConfig(client.status());
  }
  return client;
}

std::unique_ptr<http::Client> SidecarServer::peerClientOrExit(const std::string& baseUrl,
                                                              bool channels) const {
  http::ClientOptions o;
  o.channelAuthorization = peerAuthorization_;
  o.baseUrl = baseUrl;
  o.connectTimeout = std::chrono::seconds(2);
  o.maxResponseBytes = static_cast<std::size_t>(cfg_.maxBodyBytes) * 4;
  o.userAgent = "kshard-sidecar";
  o.ioThreads = ioThreads_.get();
  o.maxConnections = kMaxIdleConnections;
  auto client = makeClient(std::move(o), channels);
  if (!client.ok()) std::exit(kExitFailure);
  return std::move(*client);
}

// The data path: the app's client and host, the entities, the peers, the manager, the router
// and the drain.
Status SidecarServer::buildRouting() {
  if (backend_ == http::Backend::kBeast) {
    ioThreads_ = std::make_unique<http::IoThreads>(http::IoThreadsOptions{
        static_cast<int>(cfg_.ioThreads),
        cfg_.ioModel == "shared" ? http::IoThreadsOptions::Model::kSharedContext
                                 : http::IoThreadsOptions::Model::kContextPerThread,
        part("http")});
  }
  http::ClientOptions appOptions;
  appOptions.baseUrl = "http://127.0.0.1:" + std::to_string(cfg_.appPort);
  appOptions.requestTimeout = ms(cfg_.appTimeout);
  appOptions.maxResponseBytes = static_cast<std::size_t>(cfg_.maxBodyBytes) * 4;
  appOptions.userAgent = "kshard-sidecar";
  appOptions.ioThreads = ioThreads_.get();
  // Keep as many idle connections as messages can be in flight: with the default 32, every
  // message beyond 32 at once opened a connection and closed it afterwards.
  appOptions.maxConnections = kMaxIdleConnections;
  auto appClient = makeClient(std::move(appOptions), false);
  if (!appClient.ok()) return appClient.status();
  appClient_ = std::move(*appClient);
  appHost_ =
      std::make_unique<AppHost>(*appClient_, cfg_.appTimeout, cfg_.stopTimeout, self_.incarnation);

  EntityRegistryOptions registryOptions;
  registryOptions.onPassivation = [this] { metrics_.countPassivation(); };
  registryOptions.onLimitPassivation = [this] { metrics_.countLimitPassivation(); };
  registryOptions.maxConcurrentStops = static_cast<std::size_t>(cfg_.maxConcurrentStops);
  registryOptions.maxPendingTells = static_cast<std::size_t>(cfg_.maxPendingTells);
  registryOptions.maxPendingTellBytes = static_cast<std::size_t>(cfg_.maxPendingTellBytes);
  entities_ =
      std::make_unique<EntityRegistry>(*appHost_, scheduler_, registryOptions, part("entities"));
  appHost_->setDeadline([this] { return entities_->appDeadline(); });

  if (!cfg_.managerTokenFile.empty()) {
    managerAuthorization_ = kube::bearerHeaderFromFile(
        cfg_.managerTokenFile, SystemClock::instance(), log_, "the manager API");
  }
  if (!cfg_.peerTokenFile.empty()) {
    peerAuthorization_ =
        kube::bearerHeaderFromFile(cfg_.peerTokenFile, SystemClock::instance(), log_, "the peers");
  }
  // Messages to other sidecars go over channels (many on one connection per I/O thread); the
  // manager API stays plain HTTP.
  const bool channels = backend_ == http::Backend::kBeast && cfg_.peerTransport == "channel";
  peers_ = std::make_unique<PeerHttpClient>(
      [this, channels](const std::string& baseUrl) { return peerClientOrExit(baseUrl, channels); },
      512, peerAuthorization_);
  ManagerClient::Options managerOptions;
  managerOptions.managerOverride = cfg_.managerAddress;
  managerOptions.onConfirmed = [this](SteadyTime sentAt) { entities_->renewLease(sentAt); };
  manager_ = std::make_unique<ManagerClient>(
      self_, table_,
      [this](const std::string& baseUrl) { return peerClientOrExit(baseUrl, false); }, scheduler_,
      random_, part("manager"), managerOptions, managerAuthorization_);
  router_ = std::make_unique<Router>(table_, *entities_, *peers_, *manager_, scheduler_, random_,
                                     RouterOptions{self_.pod}, metrics_, part("router"));
  topicDelivery_ = std::make_unique<TopicDelivery>(*entities_, *appHost_);
  topicPublisher_ = std::make_unique<TopicPublisher>(
      table_, *topicDelivery_, *peers_, *manager_, scheduler_, random_,
      TopicPublisherOptions{self_.pod}, metrics_, part("topics"));
  // A drain that was undone registers again.
  drainer_ = std::make_unique<Drainer>(
      *entities_, *manager_, table_, scheduler_, part("drain"),
      Drainer::Options{cfg_.drainLinger, [this] { registrar_->registerAgain(); }});
  return Status();
}

// The Kubernetes API (the ShardMap watch, the issuer keys, the remembered entities' records) and
// who may call the peer API. With map-source=manager, the API only when --kubeconfig names it.
Status SidecarServer::buildKubeAccess() {
  if (cfg_.mapSource == "kube" || !cfg_.kubeconfig.empty()) {
    kube::LoadOptions load;
    load.kubeconfigPath = cfg_.kubeconfig;
    auto kcfg = kube::loadConfig(load, SystemClock::instance());
    if (!kcfg.ok()) {
      log_.error("cannot load the Kubernetes configuration", {{"error", kcfg.status().toString()}});
      return notConfig(kcfg.status());
    }
    auto transport =
        http::makeClient(http::Backend::kCppRest, kube::httpClientOptions(*kcfg, "kshard-sidecar"));
    if (!transport.ok()) {
      log_.error("cannot create HTTP client", {{"error", transport.status().toString()}});
      return notConfig(transport.status());
    }
    kubeTransport_ = std::move(*transport);
    kube::ClientOptions apiOptions;
    apiOptions.userAgent = "kshard-sidecar";
    api_ = std::make_unique<kube::Client>(*kubeTransport_, scheduler_, random_, part("kube"),
                                          apiOptions, kcfg->token, kcfg->pathPrefix);
  }
  if (cfg_.peerAuth != "token") {
    log_.warn("the peer API accepts every caller (--peer-auth=none)");
    authorizer_ = std::make_unique<AllowAllAuthorizer>();
    return Status();
  }
  IssuerKeys* keys = &fixedKeys_;
  if (!cfg_.issuerKeysFile.empty()) {
    auto text = kube::readFile(cfg_.issuerKeysFile);
    auto set = text.ok() ? kube::JwkSet::parse(*text) : StatusOr<kube::JwkSet>(text.status());
    if (!set.ok()) {
      log_.error("cannot read --issuer-keys-file",
                 {{"file", cfg_.issuerKeysFile}, {"error", set.status().toString()}});
      return invalidArgument("cannot read --issuer-keys-file: " + set.status().message());
    }
    fixedKeys_.set(cfg_.issuer, std::move(*set));
  } else {
    issuerKeys_ = std::make_unique<ApiServerIssuerKeys>(*api_, scheduler_, part("issuer-keys"));
    keys = issuerKeys_.get();
  }
  TokenAuthorizerOptions authOptions;
  authOptions.operatorSubject = cfg_.operatorIdentity;
  authOptions.ns = self_.shardMap.ns;
  authOptions.shardMap = self_.shardMap.toString();
  authorizer_ =
      std::make_unique<TokenAuthorizer>(*keys, table_, SystemClock::instance(), authOptions);
  return Status();
}

// Remembered entities: recorded per shard through the API server, started again on a take.
// Without an API server (map-source=manager and no --kubeconfig), none are remembered.
void SidecarServer::buildRemembered() {
  if (!api_) return;
  RememberedEntitiesOptions options;
  options.seed = random_.next();
  options.onWrite = [this](bool stored) { metrics_.countRecordWrite(stored); };
  remembered_ = std::make_unique<RememberedEntities>(
      *api_, scheduler_, sharding::ShardMapOwner{self_.shardMap.ns, self_.shardMap.name, {}},
      [this](const EntityKey& key, ShardId shard) { entities_->keepActive(key, shard); },
      [this](ShardId shard) { return entities_->ownedEpoch(shard); }, part("remembered"), options);
  entities_->setRecorder(remembered_.get());
  entities_->addShardsTakenListener([this](std::vector<ShardId> shards, Epoch epoch) {
    remembered_->shardsTaken(std::move(shards), epoch);
  });
}

// Registration and the ownership lease: kept by renewals while registered; the registrar resets
// the app, registers, and starts the keeper.
Status SidecarServer::buildLifecycle() {
  buildRemembered();
  singletons_ = std::make_unique<SingletonKeeper>(*entities_, part("singletons"));
  applier_ = std::make_unique<MapApplier>(
      self_, table_, *entities_, part("map"), [this](const sharding::ShardMap& map) {
        if (remembered_) remembered_->follow(map);
        singletons_->update(map.spec.singletons, map.spec.shards);
      });
  leaseKeeper_ = std::make_unique<LeaseKeeper>(self_, *manager_, api_.get(), *entities_, table_,
                                               scheduler_, random_, part("lease"), [this] {
                                                 // Not while draining: the pod is leaving (or has
                                                 // left) on purpose.
                                                 if (!drainer_->started() && registrar_)
                                                   registrar_->registerAgain();
                                               });
  registrar_ = std::make_unique<Registrar>(
      *applier_, issuerKeys_.get(), *appHost_, *manager_, *leaseKeeper_, part("registrar"),
      Registrar::Options{static_cast<int>(cfg_.appPort), cfg_.appWaitTimeout, cfg_.resetTimeout});
  return Status();
}

// The app API (loopback), the peer API (the pod IP) and the admin server (probes, scrapes and
// the preStop drain).
Status SidecarServer::buildServers() {
  http::ServerOptions base;
  base.maxBodyBytes = static_cast<std::size_t>(cfg_.maxBodyBytes);
  base.ioThreads = ioThreads_.get();

  http::ServerOptions appOptions = base;
  appOptions.host = "127.0.0.1";
  appOptions.port = static_cast<std::uint16_t>(cfg_.apiPort);
  appServer_ = http::makeServer(backend_, appOptions);
  appApi_ =
      std::make_unique<AppApi>(self_, *router_, table_, *entities_, *drainer_, part("app-api"),
                               AppApi::Options{static_cast<std::size_t>(cfg_.maxIdBytes)});
  appApi_->addRoutes(*appServer_);
  topicApi_ =
      std::make_unique<TopicApi>(self_, *topicPublisher_, *topicDelivery_, table_, *authorizer_);
  topicApi_->addAppRoutes(*appServer_);

  peerApi_ = std::make_unique<PeerApi>(self_, *entities_, table_, *authorizer_, metrics_,
                                       scheduler_.clock(), part("peer-api"),
                                       PeerApi::Options{static_cast<std::size_t>(cfg_.maxIdBytes)});
  http::ServerOptions peerOptions = base;
  peerOptions.host = cfg_.peerBindAddress.empty() ? cfg_.podIp : cfg_.peerBindAddress;
  peerOptions.port = static_cast<std::uint16_t>(cfg_.peerPort);
  // Other sidecars may send over channels whatever this one's --peer-transport.
  peerOptions.acceptChannels = true;
  // Callers are authenticated before their bodies are read.
  peerOptions.admit = [this](const http::Request& head) { return peerApi_->admit(head); };
  peerServer_ = http::makeServer(backend_, peerOptions);
  peerApi_->addRoutes(*peerServer_);
  topicApi_->addPeerRoutes(*peerServer_);

  http::ServerOptions adminOptions;
  adminOptions.host = cfg_.adminBindAddress;
  adminOptions.port = static_cast<std::uint16_t>(cfg_.adminPort);
  // Probes, scrapes and the preStop drain: no bodies, a few connections from the node and the
  // monitoring. Bounded like the operator's admin server, before anyone is authenticated.
  adminOptions.maxBodyBytes = kAdminMaxBodyBytes;
  adminOptions.maxConnections = kAdminMaxConnections;
  adminOptions.maxConnectionsPerPeer = kAdminMaxConnectionsPerPeer;
  // Its own thread: /healthz and /metrics answer even while the data path's threads are busy.
  adminOptions.threads = 1;
  adminServer_ = http::makeServer(http::Backend::kBeast, adminOptions);
  http::addAdminRoutes(
      *adminServer_, registry_, [this] { return notReadyReason(); },
      [this] {
        metrics_.refresh(entities_->activeEntitiesByType(), entities_->ownedShards().size());
        metrics_.showWaitingEntities(entities_->waitingEntities());
        metrics_.showLoad(entities_->sampleLoad(kLoadHalfLife));
        if (remembered_) metrics_.showRemembered(remembered_->rememberedCount());
        metrics_.showSingletons(entities_->activeEntities(std::string(kSingletonEntityType)));
        if (watcher_) metrics_.showMapSync(watcher_->stats());
      });

  // The preStop drain (sidecar/drain_endpoint.h), and the app's own hook the injector moved here.
  DrainEndpoint::Options drainOptions{cfg_.podIp, cfg_.hostIp, cfg_.drainToken, std::nullopt};
  if (!cfg_.appPreStop.empty()) {
    auto hook = PreStopHook::parse(cfg_.appPreStop);
    if (!hook.ok()) {
      log_.error("cannot read --app-prestop", {{"error", hook.status().toString()}});
      return invalidArgument("cannot read --app-prestop: " + hook.status().message());
    }
    drainOptions.appHook = std::move(*hook);
  }
  drainEndpoint_ = std::make_unique<DrainEndpoint>(*drainer_, scheduler_, part("drain"),
                                                   std::move(drainOptions));
  drainEndpoint_->addRoutes(*adminServer_);
  return Status();
}

// The ShardMap source: the watch through the API, or the manager's assignments polled.
Status SidecarServer::buildMapSource() {
  if (cfg_.mapSource == "kube") {
    watcher_ = std::make_unique<MapWatcher>(*api_, scheduler_, random_, part("map-watch"), self_,
                                            *applier_, *manager_, authorizer_.get());
    return Status();
  }
  http::ClientOptions o;
  o.baseUrl = "http://" + cfg_.managerAddress;
  o.ioThreads = ioThreads_.get();
  auto client = makeClient(std::move(o), false);
  if (!client.ok()) return client.status();
  poller_ = std::make_unique<MapPoller>(std::move(*client), scheduler_, cfg_.mapPollInterval, self_,
                                        *applier_, part("map-poll"), managerAuthorization_);
  return Status();
}

Status SidecarServer::start() {
  started_ = true;  // stop() stops what started, should a server fail
  if (issuerKeys_) issuerKeys_->start();
  for (auto* s : {appServer_.get(), peerServer_.get(), adminServer_.get()}) {
    if (Status st = s->start(); !st.ok()) {
      log_.error("cannot start a server", {{"error", st.toString()}});
      return st;
    }
  }
  log_.info("serving",
            {{"app_api", "127.0.0.1:" + std::to_string(appServer_->port())},
             {"peer_api", (cfg_.peerBindAddress.empty() ? cfg_.podIp : cfg_.peerBindAddress) + ":" +
                              std::to_string(peerServer_->port())},
             {"admin", cfg_.adminBindAddress + ":" + std::to_string(adminServer_->port())}});
  if (watcher_) watcher_->start();
  if (poller_) poller_->start();
  registrar_->start();
  return Status();
}

std::string SidecarServer::notReadyReason() const {
  if (drainer_->started()) return "draining";
  return registrar_->notReadyReason();
}

void SidecarServer::drain(std::function<void(Status)> done) {
  drainer_->stopping();
  if (registrar_->registered() || drainer_->started()) {
    drainer_->drain(std::move(done));
  } else {
    done(Status());  // never registered: nothing to hand off
  }
}

void SidecarServer::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  registrar_->stop();
  leaseKeeper_->stop();
  // The app's own requests still in flight get their answers, routed with the ShardMap still
  // watched: the router retries each until the ShardMap's sendTimeout at most. (In a pod the app
  // container stops first, so there are none.)
  if (appServer_) {
    appServer_->stop(ms(table_.snapshot()->spec.sendTimeout + std::chrono::seconds(1)));
  }
  if (watcher_) watcher_->stop();
  if (issuerKeys_) issuerKeys_->stop();
  if (poller_) poller_->stop();
  manager_->stop();
  if (peerServer_) peerServer_->stop(std::chrono::seconds(1));
  if (adminServer_) adminServer_->stop();
}

}  // namespace kshard::sidecar
