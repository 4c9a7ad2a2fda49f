#include "sidecar/lease_keeper.h"

#include <algorithm>

#include "sidecar/map_watcher.h"

namespace kshard::sidecar {
namespace {

// Renewals when the map has not said the lease yet (it always does once loaded).
constexpr Duration kFallbackLease = std::chrono::seconds(30);

}  // namespace

LeaseKeeper::LeaseKeeper(Identity self, ManagerClient& manager, kube::Client* api,
                         EntityRegistry& registry, const RoutingTable& table, Scheduler& scheduler,
                         Random& random, Logger logger, std::function<void()> onNotRegistered)
    : self_(std::move(self)),
      manager_(manager),
      api_(api),
      registry_(registry),
      table_(table),
      scheduler_(scheduler),
      log_(std::move(logger)),
      onNotRegistered_(std::move(onNotRegistered)),
      random_(random) {}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::start() {
  std::uint64_t generation;
  {
    std::lock_guard lock(mu_);
    if (running_) return;
    running_ = true;
    generation = ++generation_;
  }
  tick(generation);
}

void LeaseKeeper::stop() {
  std::lock_guard lock(mu_);
  running_ = false;
  ++generation_;
  if (timer_ != 0) scheduler_.cancel(timer_);
  timer_ = 0;
}

bool LeaseKeeper::current(std::uint64_t generation) {
  std::lock_guard lock(mu_);
  return running_ && generation == generation_;
}

Duration LeaseKeeper::period() const {
  const Duration lease = table_.snapshot()->shardCount > 0
                             ? table_.snapshot()->spec.ownershipLease
                             : kFallbackLease;
  return lease / 4;
}

void LeaseKeeper::tick(std::uint64_t generation) {
  if (!current(generation)) return;
  // A renew that takes longer than an eighth of the lease is worth less than asking elsewhere.
  const Duration timeout = std::max<Duration>(period() / 2, std::chrono::milliseconds(500));
  manager_.renew(timeout, [this, generation](Status renewed) {
    if (!current(generation)) return;
    if (renewed.ok()) {
      bool recovered;
      {
        std::lock_guard lock(mu_);
        recovered = std::exchange(failing_, false);
      }
      if (recovered) log_.info("ownership lease renewed by the operator again");
      scheduleNext(generation);
      return;
    }
    if (renewed.code() == StatusCode::kNotFound) {
      log_.warn("the operator does not know this pod as registered; registering again",
                {{"reason", renewed.message()}});
      if (onNotRegistered_) onNotRegistered_();
    }
    askApiServer(generation);
  });
}

void LeaseKeeper::askApiServer(std::uint64_t generation) {
  if (api_ == nullptr) {
    {
      std::lock_guard lock(mu_);
      failing_ = true;
    }
    log_.warn("ownership lease not renewed: the operator did not confirm it");
    scheduleNext(generation);
    return;
  }
  kube::ApiRequest request;
  request.method = http::Method::kGet;
  request.path = kShardMapResource.objectPath(self_.shardMap.ns, self_.shardMap.name);
  request.description = "confirm pod " + self_.pod + " with the API server";
  request.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max<Duration>(period() / 2, std::chrono::milliseconds(500)));
  const SteadyTime sentAt = scheduler_.clock().now();
  api_->callAsync(std::move(request), [this, generation, sentAt](StatusOr<nlohmann::json> r) {
    if (!current(generation)) return;
    if (r.ok()) {
      // The API server took this pod's bound token: the pod object existed, with this uid, when
      // it checked, which was after `sentAt`.
      registry_.renewLease(sentAt);
    }
    bool first;
    {
      std::lock_guard lock(mu_);
      first = !std::exchange(failing_, true);
    }
    if (first || !r.ok()) {
      log_.warn(r.ok() ? "ownership lease renewed by the API server (the operator did not answer)"
                       : "ownership lease not renewed: neither the operator nor the API server "
                         "confirmed it",
                {{"error", r.ok() ? std::string() : r.status().toString()}});
    }
    scheduleNext(generation);
  });
}

void LeaseKeeper::scheduleNext(std::uint64_t generation) {
  std::lock_guard lock(mu_);
  if (!running_ || generation != generation_) return;
  // ±10 %: the pods of a map that started together do not renew in step.
  const Duration base = period();
  const auto spread = static_cast<std::uint64_t>(base.count() / 5) + 1;
  const Duration wait = base - base / 10 + Duration(static_cast<Duration::rep>(
                                                random_.uniform(spread)));
  timer_ = scheduler_.runAfter(wait, [this, generation] { tick(generation); });
}

}  // namespace kshard::sidecar
