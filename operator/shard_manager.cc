#include "operator/shard_manager.h"

namespace kshard::manager {

ShardManager::ShardManager(ControllerDeps deps) : deps_(std::move(deps)) {}

ShardManager::~ShardManager() { shutdown(); }

void ShardManager::upsert(sharding::ShardMap map) {
  const protocol::ShardMapRef ref{map.metadata.namespace_, map.metadata.name};
  std::shared_ptr<ShardMapController> controller;
  std::shared_ptr<ShardMapController> replaced;
  bool created = false;
  {
    std::lock_guard lock(mu_);
    auto it = controllers_.find(ref.toString());
    // The same name with another uid is another object: the ShardMap was deleted and created
    // again, and the deletion was not seen (a relist after it reports the new object as an
    // update). Its state (pods, epochs) must not leak into the new one.
    if (it != controllers_.end() && !map.metadata.uid.empty() &&
        uids_[ref.toString()] != map.metadata.uid) {
      replaced = std::move(it->second);
      controllers_.erase(it);
      it = controllers_.end();
    }
    if (it == controllers_.end()) {
      uids_[ref.toString()] = map.metadata.uid;
      controller = ShardMapController::create(deps_, map);
      controllers_.emplace(ref.toString(), controller);
      created = true;
    } else {
      controller = it->second;
    }
    if (created && leading_) controller->startLeading();
  }
  if (replaced) {
    deps_.logger.warn("ShardMap replaced by a new object of the same name; starting afresh",
                   {{"shard_map", ref.toString()}, {"uid", map.metadata.uid}});
    replaced->shutdown();
  }
  if (!created) controller->observe(std::move(map));
}

void ShardManager::remove(const protocol::ShardMapRef& ref) {
  std::shared_ptr<ShardMapController> controller;
  {
    std::lock_guard lock(mu_);
    auto it = controllers_.find(ref.toString());
    if (it == controllers_.end()) return;
    controller = std::move(it->second);
    controllers_.erase(it);
    uids_.erase(ref.toString());
  }
  controller->shutdown();
  deps_.metrics.forget(ref.toString());
}

void ShardManager::podChanged(const std::string& ns, const std::string& shardMap,
                              const std::string& pod) {
  if (auto c = find({ns, shardMap})) c->podChanged(pod);
}

void ShardManager::startLeading() {
  std::lock_guard lock(mu_);
  if (leading_) return;
  leading_ = true;
  deps_.metrics.setLeader(true);
  for (auto& [key, c] : controllers_) c->startLeading();
}

void ShardManager::stopLeading() {
  std::lock_guard lock(mu_);
  if (!leading_) return;
  leading_ = false;
  deps_.metrics.setLeader(false);
  for (auto& [key, c] : controllers_) c->stopLeading();
}

bool ShardManager::leading() const {
  std::lock_guard lock(mu_);
  return leading_;
}

std::shared_ptr<ShardMapController> ShardManager::find(const protocol::ShardMapRef& ref) const {
  std::lock_guard lock(mu_);
  auto it = controllers_.find(ref.toString());
  return it == controllers_.end() ? nullptr : it->second;
}

std::vector<protocol::ShardMapRef> ShardManager::shardMaps() const {
  std::lock_guard lock(mu_);
  std::vector<protocol::ShardMapRef> out;
  for (const auto& [key, c] : controllers_) out.push_back(c->ref());
  return out;
}

std::string ShardManager::leaderAddress(const protocol::ShardMapRef& ref) const {
  const std::string holder = deps_.leadership.holder();
  if (holder.empty()) return {};
  // The map asked about first; any other the holder has taken over names the same address.
  std::vector<std::shared_ptr<ShardMapController>> candidates;
  if (auto c = find(ref)) candidates.push_back(std::move(c));
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, other] : controllers_) candidates.push_back(other);
  }
  for (const auto& c : candidates) {
    auto stored = c->storedManager();
    if (stored && stored->pod == holder) return stored->address;
  }
  return {};
}

void ShardManager::shutdown() {
  std::map<std::string, std::shared_ptr<ShardMapController>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(controllers_);
  }
  for (auto& [key, c] : all) c->shutdown();
}

}  // namespace kshard::manager
