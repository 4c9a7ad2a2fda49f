#include "sidecar/registrar.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>

namespace kshard::sidecar {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);
// Between attempts of a reset the app refused or failed.
constexpr auto kResetRetry = std::chrono::seconds(2);

// True once something accepts TCP connections on 127.0.0.1:port (the app is up).
bool appListening(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

Registrar::Registrar(MapApplier& applier, ApiServerIssuerKeys* issuerKeys, AppHost& app,
                     ManagerClient& manager, LeaseKeeper& lease, Logger logger, Options options)
    : applier_(applier),
      issuerKeys_(issuerKeys),
      app_(app),
      manager_(manager),
      lease_(lease),
      log_(std::move(logger)),
      options_(options) {}

Registrar::~Registrar() { stop(); }

void Registrar::start() {
  thread_ = std::thread([this] { run(); });
}

void Registrar::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_.store(true);
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Registrar::notReadyReason() const {
  if (registered_.load()) return "";
  std::lock_guard lock(mu_);
  return waitingFor_;
}

void Registrar::setWaitingFor(std::string what) {
  std::lock_guard lock(mu_);
  waitingFor_ = std::move(what);
}

void Registrar::run() {
  if (!waitForPrerequisites() || !resetApp()) return;
  registerPod();
}

bool Registrar::waitForPrerequisites() {
  while (!stopping_.load() && !applier_.waitForMap(std::chrono::milliseconds(200))) {
  }
  setWaitingFor("service-account issuer keys not loaded yet");
  while (issuerKeys_ != nullptr && !stopping_.load() &&
         !issuerKeys_->waitLoaded(std::chrono::milliseconds(200))) {
  }
  setWaitingFor("the app does not listen on its port yet");
  const auto deadline = std::chrono::steady_clock::now() + options_.appWaitTimeout;
  std::unique_lock lock(mu_);
  while (!stopping_.load() && !appListening(options_.appPort)) {
    if (std::chrono::steady_clock::now() > deadline) {
      waitingFor_ = "the app did not listen on port " + std::to_string(options_.appPort) +
                    " within --app-wait-timeout";
      log_.error("the app does not listen; not registering", {{"app_port", options_.appPort}});
      return false;
    }
    wake_.wait_for(lock, kPoll);
  }
  return !stopping_.load();
}

bool Registrar::resetApp() {
  setWaitingFor("the app has not confirmed the reset (POST /kshard/reset) yet");
  for (int attempt = 1; !stopping_.load(); ++attempt) {
    std::promise<Status> answered;
    auto answer = answered.get_future();
    app_.reset(options_.resetTimeout, [&answered](Status s) { answered.set_value(std::move(s)); });
    const Status s = answer.get();  // the client answers every request, by its timeout at worst
    if (s.ok()) {
      log_.info("the app dropped every entity it held (reset)", {{"attempts", attempt}});
      resetDone_.store(true);
      return true;
    }
    log_.error("the app's reset failed; not registering until it succeeds",
               {{"error", s.toString()}, {"attempts", attempt}});
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, kResetRetry, [this] { return stopping_.load(); });
  }
  return false;
}

void Registrar::registerAgain() {
  // Before the reset, the first registration is still to come (run() makes it).
  if (stopping_.load() || !resetDone_.load()) return;
  registerPod();
}

void Registrar::registerPod() {
  if (registering_.exchange(true)) return;
  manager_.registerPod([this](StatusOr<std::uint64_t> epoch) {
    registering_.store(false);
    if (!epoch.ok()) {
      log_.error("registration failed", {{"error", epoch.status().toString()}});
      return;
    }
    registered_.store(true);
    lease_.start();
    log_.info("ready", {{"epoch", *epoch}});
  });
}

}  // namespace kshard::sidecar
