// kshard-sidecar: routes entity messages to the pod that owns their shard, and runs this pod's
// entities in its app (DESIGN.md "Flows"). See `kshard-sidecar --help`.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <random>
#include <thread>

#include "base/logger.h"
#include "base/options.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "http/admin_routes.h"
#include "http/channel_client.h"
#include "http/factory.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/token_source.h"
#include "metrics/prometheus_registry.h"
#include "sidecar/app_api.h"
#include "sidecar/app_host.h"
#include "sidecar/config.h"
#include "sidecar/drain_endpoint.h"
#include "sidecar/drainer.h"
#include "sidecar/entity_registry.h"
#include "sidecar/lease_keeper.h"
#include "sidecar/manager_client.h"
#include "sidecar/map_applier.h"
#include "sidecar/map_poller.h"
#include "sidecar/map_watcher.h"
#include "sidecar/peer_api.h"
#include "sidecar/peer_http_client.h"
#include "sidecar/registrar.h"
#include "sidecar/request_authorizer.h"
#include "sidecar/router.h"
#include "sidecar/routing_table.h"
#include "sidecar/sidecar_error.h"
#include "sidecar/sidecar_metrics.h"
#include "sidecar/token_authorizer.h"

namespace kshard::sidecar {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitConfig = 2;
constexpr int kExitFailure = 1;

// Idle keep-alive connections a sidecar keeps to the app and to each peer. Idle connections close
// after the client's idle timeout, so a burst does not hold them for long.
constexpr std::size_t kMaxIdleConnections = 1024;
// The admin server's bounds (/metrics, /healthz, /readyz, /v1/drain): see where they are set.
constexpr std::size_t kAdminMaxBodyBytes = 4096;
constexpr std::size_t kAdminMaxConnections = 64;
constexpr std::size_t kAdminMaxConnectionsPerPeer = 16;

std::unique_ptr<http::Client> makeClientOrDie(http::Backend backend, http::ClientOptions options,
                                              const Logger& log, bool channels = false) {
  StatusOr<std::unique_ptr<http::Client>> client{std::unique_ptr<http::Client>()};
  if (channels) {
    auto c = http::ChannelClient::create(std::move(options));
    client = c.ok() ? StatusOr<std::unique_ptr<http::Client>>(std::move(*c))
                    : StatusOr<std::unique_ptr<http::Client>>(c.status());
  } else {
    client = http::makeClient(backend, std::move(options));
  }
  if (!client.ok()) {
    log.error("cannot create HTTP client", {{"error", client.status().toString()}});
    std::exit(kExitFailure);
  }
  return std::move(*client);
}

int run(int argc, char** argv) {
  SidecarConfig cfg;
  OptionSet opts("kshard-sidecar",
                 "Routes entity messages to the pod that owns their shard and runs this pod's "
                 "entities in its app. Injected into annotated pods by kshard-operator.");
  cfg.declare(opts);
  auto parsed = opts.parse(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "kshard-sidecar: " << parsed.status().message() << "\n";
    return kExitConfig;
  }
  if (*parsed == OptionSet::Outcome::kHelp) {
    std::cout << opts.usage();
    return kExitOk;
  }
  if (Status s = cfg.validate(); !s.ok()) {
    std::cerr << "kshard-sidecar: " << s.message() << "\n";
    return kExitConfig;
  }
  LogLevel level = LogLevel::kInfo;
  parseLogLevel(cfg.logLevel, level);
  Identity self = cfg.identity();
  self.incarnation = newIncarnation();
  Logger log = Logger("sidecar", level)
                   .withFields({{"pod", self.pod}, {"shard_map", self.shardMap.toString()}});
  log.info("starting", {{"incarnation", self.incarnation}});

  // Signals are handled by sigwait on this thread; every thread started below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const auto backend = *http::parseBackend(cfg.httpBackend);
  metrics::PrometheusRegistry registry;
  SidecarMetrics metrics(registry);
  ThreadScheduler scheduler;
  SeededRandom random(std::random_device{}());
  const auto ms = [](Duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d);
  };

  // One set of I/O threads for the app and peer APIs and every client of the data path, so that a
  // forwarded message is received, sent on and answered without a hand-off between threads (see
  // http/io_threads.h). Declared before everything that runs on it. cpprestsdk has its own pool.
  std::unique_ptr<http::IoThreads> ioThreads;
  if (backend == http::Backend::kBeast) {
    ioThreads = std::make_unique<http::IoThreads>(http::IoThreadsOptions{
        static_cast<int>(cfg.ioThreads),
        cfg.ioModel == "shared" ? http::IoThreadsOptions::Model::kSharedContext
                                : http::IoThreadsOptions::Model::kContextPerThread,
        log.withFields({{"part", "http"}})});
  }

  http::ClientOptions appClientOptions;
  appClientOptions.baseUrl = "http://127.0.0.1:" + std::to_string(cfg.appPort);
  appClientOptions.requestTimeout = ms(cfg.appTimeout);
  appClientOptions.maxResponseBytes = static_cast<std::size_t>(cfg.maxBodyBytes) * 4;
  appClientOptions.userAgent = "kshard-sidecar";
  appClientOptions.ioThreads = ioThreads.get();
  // Keep as many idle connections as messages can be in flight: with the default 32, every
  // message beyond 32 at once opened a connection and closed it afterwards.
  appClientOptions.maxConnections = kMaxIdleConnections;
  auto appClient = makeClientOrDie(backend, appClientOptions, log);
  AppHost appHost(*appClient, cfg.appTimeout, cfg.stopTimeout, self.incarnation);

  EntityRegistryOptions registryOptions;
  registryOptions.onPassivation = [&metrics] { metrics.countPassivation(); };
  registryOptions.maxConcurrentStops = static_cast<std::size_t>(cfg.maxConcurrentStops);
  registryOptions.maxPendingTells = static_cast<std::size_t>(cfg.maxPendingTells);
  registryOptions.maxPendingTellBytes = static_cast<std::size_t>(cfg.maxPendingTellBytes);
  EntityRegistry entities(appHost, scheduler, registryOptions,
                          log.withFields({{"part", "entities"}}));
  appHost.setDeadline([&entities] { return entities.appDeadline(); });
  RoutingTable table;

  // This pod's projected tokens, one per direction (protocol/audiences.h): for the manager API,
  // and for the other sidecars of its ShardMap. Neither is any good to the other party.
  std::function<std::string()> managerAuthorization;
  if (!cfg.managerTokenFile.empty()) {
    managerAuthorization = kube::bearerHeaderFromFile(cfg.managerTokenFile, SystemClock::instance(),
                                                      log, "the manager API");
  }
  std::function<std::string()> peerAuthorization;
  if (!cfg.peerTokenFile.empty()) {
    peerAuthorization =
        kube::bearerHeaderFromFile(cfg.peerTokenFile, SystemClock::instance(), log, "the peers");
  }
  const auto peerClient = [backend, &cfg, &log, &peerAuthorization, io = ioThreads.get()](
                              const std::string& baseUrl, bool channels) {
    http::ClientOptions o;
    o.channelAuthorization = peerAuthorization;
    o.baseUrl = baseUrl;
    o.connectTimeout = std::chrono::seconds(2);
    o.maxResponseBytes = static_cast<std::size_t>(cfg.maxBodyBytes) * 4;
    o.userAgent = "kshard-sidecar";
    o.ioThreads = io;
    o.maxConnections = kMaxIdleConnections;
    return makeClientOrDie(backend, o, log, channels);
  };
  const auto peerFactory = [&peerClient](const std::string& baseUrl) {
    return peerClient(baseUrl, false);
  };
  // Messages to other sidecars go over channels (many on one connection per I/O thread); the
  // manager API stays plain HTTP.
  const bool channels = backend == http::Backend::kBeast && cfg.peerTransport == "channel";
  PeerHttpClient peers(
      [&peerClient, channels](const std::string& baseUrl) { return peerClient(baseUrl, channels); },
      512, peerAuthorization);
  ManagerClient::Options managerOptions;
  managerOptions.managerOverride = cfg.managerAddress;
  managerOptions.onConfirmed = [&entities](SteadyTime sentAt) { entities.renewLease(sentAt); };
  ManagerClient manager(self, table, peerFactory, scheduler, random,
                        log.withFields({{"part", "manager"}}), managerOptions,
                        managerAuthorization);
  Router router(table, entities, peers, manager, scheduler, random, {self.pod}, metrics,
                log.withFields({{"part", "router"}}));
  // Registers again after a drain that was undone; set once the registrar exists.
  std::function<void()> registerAgain;
  Drainer drainer(entities, manager, table, scheduler, log.withFields({{"part", "drain"}}),
                  {cfg.drainLinger, [&registerAgain] { registerAgain(); }});

  // The Kubernetes API: the ShardMap watch and the service-account issuer keys.
  std::unique_ptr<http::Client> kubeTransport;
  std::unique_ptr<kube::Client> api;
  if (cfg.mapSource == "kube") {
    kube::LoadOptions load;
    load.kubeconfigPath = cfg.kubeconfig;
    auto kcfg = kube::loadConfig(load, SystemClock::instance());
    if (!kcfg.ok()) {
      log.error("cannot load the Kubernetes configuration", {{"error", kcfg.status().toString()}});
      return kExitFailure;
    }
    kubeTransport = makeClientOrDie(http::Backend::kCppRest,
                                    kube::httpClientOptions(*kcfg, "kshard-sidecar"), log);
    kube::ClientOptions apiOptions;
    apiOptions.userAgent = "kshard-sidecar";
    api = std::make_unique<kube::Client>(*kubeTransport, scheduler, random,
                                         log.withFields({{"part", "kube"}}), apiOptions,
                                         kcfg->token, kcfg->pathPrefix);
  }
  std::unique_ptr<ApiServerIssuerKeys> issuerKeys;
  FixedIssuerKeys fixedKeys;
  std::unique_ptr<RequestAuthorizer> authorizer;
  if (cfg.peerAuth == "token") {
    IssuerKeys* keys = &fixedKeys;
    if (!cfg.issuerKeysFile.empty()) {
      auto text = kube::readFile(cfg.issuerKeysFile);
      auto set = text.ok() ? kube::JwkSet::parse(*text) : StatusOr<kube::JwkSet>(text.status());
      if (!set.ok()) {
        log.error("cannot read --issuer-keys-file",
                  {{"file", cfg.issuerKeysFile}, {"error", set.status().toString()}});
        return kExitConfig;
      }
      fixedKeys.set(cfg.issuer, std::move(*set));
    } else {
      issuerKeys = std::make_unique<ApiServerIssuerKeys>(*api, scheduler,
                                                         log.withFields({{"part", "issuer-keys"}}));
      issuerKeys->start();
      keys = issuerKeys.get();
    }
    TokenAuthorizerOptions authOptions;
    authOptions.operatorSubject = cfg.operatorIdentity;
    authOptions.ns = self.shardMap.ns;
    authOptions.shardMap = self.shardMap.toString();
    authorizer =
        std::make_unique<TokenAuthorizer>(*keys, table, SystemClock::instance(), authOptions);
  } else {
    log.warn("the peer API accepts every caller (--peer-auth=none)");
    authorizer = std::make_unique<AllowAllAuthorizer>();
  }

  MapApplier applier(self, table, entities, log.withFields({{"part", "map"}}));
  // The ownership lease is kept by renewals while registered; the registrar resets the app,
  // registers, and starts the keeper.
  std::unique_ptr<Registrar> registrar;
  LeaseKeeper leaseKeeper(self, manager, api.get(), entities, table, scheduler, random,
                          log.withFields({{"part", "lease"}}), [&] {
                            // Not while draining: the pod is leaving (or has left) on purpose.
                            if (!drainer.started() && registrar) registrar->registerAgain();
                          });
  registrar = std::make_unique<Registrar>(
      applier, issuerKeys.get(), appHost, manager, leaseKeeper,
      log.withFields({{"part", "registrar"}}),
      Registrar::Options{static_cast<int>(cfg.appPort), cfg.appWaitTimeout, cfg.resetTimeout});
  registerAgain = [&] { registrar->registerAgain(); };

  http::ServerOptions base;
  base.maxBodyBytes = static_cast<std::size_t>(cfg.maxBodyBytes);
  base.ioThreads = ioThreads.get();

  http::ServerOptions appOptions = base;
  appOptions.host = "127.0.0.1";
  appOptions.port = static_cast<std::uint16_t>(cfg.apiPort);
  auto appServer = http::makeServer(backend, appOptions);
  AppApi appApi(self, router, table, entities, drainer, log.withFields({{"part", "app-api"}}),
                {static_cast<std::size_t>(cfg.maxIdBytes)});
  appApi.addRoutes(*appServer);

  PeerApi peerApi(self, entities, table, *authorizer, metrics, scheduler.clock(),
                  log.withFields({{"part", "peer-api"}}),
                  {static_cast<std::size_t>(cfg.maxIdBytes)});
  http::ServerOptions peerOptions = base;
  peerOptions.host = cfg.peerBindAddress.empty() ? cfg.podIp : cfg.peerBindAddress;
  peerOptions.port = static_cast<std::uint16_t>(cfg.peerPort);
  // Other sidecars may send over channels whatever this one's --peer-transport.
  peerOptions.acceptChannels = true;
  // Callers are authenticated before their bodies are read.
  peerOptions.admit = [&peerApi](const http::Request& head) { return peerApi.admit(head); };
  auto peerServer = http::makeServer(backend, peerOptions);
  peerApi.addRoutes(*peerServer);

  http::ServerOptions adminOptions;
  adminOptions.host = cfg.adminBindAddress;
  adminOptions.port = static_cast<std::uint16_t>(cfg.adminPort);
  // Probes, scrapes and the preStop drain: no bodies, a few connections from the node and the
  // monitoring. Bounded like the operator's admin server, before anyone is authenticated.
  adminOptions.maxBodyBytes = kAdminMaxBodyBytes;
  adminOptions.maxConnections = kAdminMaxConnections;
  adminOptions.maxConnectionsPerPeer = kAdminMaxConnectionsPerPeer;
  // Its own thread: /healthz and /metrics answer even while the data path's threads are busy.
  adminOptions.threads = 1;
  auto adminServer = http::makeServer(http::Backend::kBeast, adminOptions);
  http::addAdminRoutes(
      *adminServer, registry,
      [&]() -> std::string {
        if (drainer.started()) return "draining";
        return registrar->notReadyReason();
      },
      [&] { metrics.refresh(entities.activeEntitiesByType(), entities.ownedShards().size()); });

  // The preStop drain (sidecar/drain_endpoint.h), and the app's own hook the injector moved here.
  DrainEndpoint::Options drainOptions{cfg.podIp, cfg.hostIp, cfg.drainToken, std::nullopt};
  if (!cfg.appPreStop.empty()) {
    auto hook = PreStopHook::parse(cfg.appPreStop);
    if (!hook.ok()) {
      log.error("cannot read --app-prestop", {{"error", hook.status().toString()}});
      return kExitConfig;
    }
    drainOptions.appHook = std::move(*hook);
  }
  DrainEndpoint drainEndpoint(drainer, scheduler, log.withFields({{"part", "drain"}}),
                              std::move(drainOptions));
  drainEndpoint.addRoutes(*adminServer);

  for (auto* s : {appServer.get(), peerServer.get(), adminServer.get()}) {
    if (Status st = s->start(); !st.ok()) {
      log.error("cannot start a server", {{"error", st.toString()}});
      return kExitFailure;
    }
  }
  log.info("serving", {{"app_api", "127.0.0.1:" + std::to_string(cfg.apiPort)},
                       {"peer_api", peerOptions.host + ":" + std::to_string(cfg.peerPort)},
                       {"admin", adminOptions.host + ":" + std::to_string(cfg.adminPort)}});

  // The ShardMap source.
  std::unique_ptr<MapWatcher> watcher;
  std::unique_ptr<MapPoller> poller;
  if (cfg.mapSource == "kube") {
    watcher = std::make_unique<MapWatcher>(*api, scheduler, random,
                                           log.withFields({{"part", "map-watch"}}), self, applier);
    watcher->start();
  } else {
    http::ClientOptions o;
    o.baseUrl = "http://" + cfg.managerAddress;
    o.ioThreads = ioThreads.get();
    poller = std::make_unique<MapPoller>(
        makeClientOrDie(backend, o, log), scheduler, cfg.mapPollInterval, self, applier,
        log.withFields({{"part", "map-poll"}}), managerAuthorization);
    poller->start();
  }

  registrar->start();

  // Wait for SIGTERM/SIGINT: the first drains, a second is only logged (the drain goes on; an
  // exit now could drop accepted messages).
  int sig = 0;
  sigwait(&signals, &sig);
  log.info("signal received, draining", {{"signal", sig}});
  drainer.stopping();
  std::mutex mu;
  std::condition_variable cv;
  bool drained = false;
  Status drainResult;
  if (registrar->registered() || drainer.started()) {
    drainer.drain([&](Status st) {
      std::lock_guard lock(mu);
      drainResult = st;
      drained = true;
      cv.notify_all();
    });
  } else {
    drained = true;  // never registered: nothing to hand off
  }
  std::thread secondSignal([&] {
    int again = 0;
    while (sigwait(&signals, &again) == 0) {
      std::lock_guard lock(mu);
      if (drained) return;
      log.warn("second signal ignored while draining", {{"signal", again}});
    }
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return drained; });
  }
  // Wake the second-signal thread so it sees `drained` and ends.
  pthread_kill(secondSignal.native_handle(), SIGTERM);
  secondSignal.join();
  registrar->stop();
  leaseKeeper.stop();
  // The app's own requests still in flight get their answers, routed with the ShardMap still
  // watched: the router retries each until the ShardMap's sendTimeout at most. (In a pod the app
  // container stops first, so there are none.)
  appServer->stop(std::chrono::duration_cast<std::chrono::milliseconds>(
      table.snapshot()->spec.sendTimeout + std::chrono::seconds(1)));
  if (watcher) watcher->stop();
  if (issuerKeys) issuerKeys->stop();
  if (poller) poller->stop();
  manager.stop();
  peerServer->stop(std::chrono::seconds(1));
  adminServer->stop();
  log.info("stopped", {{"drain", drainResult.ok() ? "ok" : drainResult.toString()}});
  // Exit without unwinding the object graph: scheduler timers and client callbacks still refer
  // to its parts, and tearing it down buys nothing once the servers are closed.
  std::fflush(nullptr);
  ::_exit(drainResult.ok() ? kExitOk : kExitFailure);
}

}  // namespace
}  // namespace kshard::sidecar

int main(int argc, char** argv) { return kshard::sidecar::run(argc, argv); }
