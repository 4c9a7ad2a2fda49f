// RememberedEntities: the calls of the registry and each shard's chain of steps. The steps'
// requests and answers are in remembered_entities_steps.cc.
#include "sidecar/remembered_entities.h"

#include <algorithm>
#include <cmath>

namespace kshard::sidecar {
namespace {

RememberedEntitiesOptions withDefaults(RememberedEntitiesOptions o) {
  o.attemptsPerStart = std::max(o.attemptsPerStart, 1);
  o.conflictsAtOnce = std::max(o.conflictsAtOnce, 0);
  return o;
}

}  // namespace

Status RememberedEntities::notOwned(ShardId shard) {
  return failedPrecondition("this pod no longer owns shard " + std::to_string(shard) +
                            "; its new owner remembers its entities");
}

RememberedEntities::RememberedEntities(kube::Client& api, Scheduler& scheduler,
                                       sharding::ShardMapOwner map, KeepActive keepActive,
                                       OwnedEpoch ownedEpoch, Logger logger,
                                       RememberedEntitiesOptions options)
    : api_(api),
      scheduler_(scheduler),
      ns_(std::move(map.ns)),
      name_(std::move(map.name)),
      keepActive_(std::move(keepActive)),
      ownedEpoch_(std::move(ownedEpoch)),
      log_(std::move(logger)),
      options_(withDefaults(std::move(options))),
      random_(options_.seed),
      uid_(std::move(map.uid)) {}

RememberedEntities::~RememberedEntities() { lifetime_.end(); }

void RememberedEntities::run(Actions& actions) {
  for (auto& a : actions) a();
  actions.clear();
}

void RememberedEntities::follow(const sharding::ShardMap& map) {
  std::lock_guard lock(mu_);
  if (!map.metadata.uid.empty()) uid_ = map.metadata.uid;
  types_ = {map.spec.rememberedEntityTypes.begin(), map.spec.rememberedEntityTypes.end()};
}

bool RememberedEntities::remembered(const std::string& type) {
  std::lock_guard lock(mu_);
  return types_.count(type) > 0;
}

void RememberedEntities::shardsTaken(std::vector<ShardId> shards, Epoch epoch) {
  Actions out;
  std::vector<ShardId> fresh;
  {
    std::lock_guard lock(mu_);
    // A map that remembers no type has no records to read: a take costs nothing.
    if (types_.empty()) return;
    for (ShardId shard : shards) {
      auto it = shards_.find(shard);
      if (it != shards_.end() && it->second.epoch > epoch) continue;  // an older take, late
      if (it != shards_.end() && it->second.epoch == epoch) {
        // Entities may run again at the same epoch (the lease's fence lifted, an undrain, a
        // handoff taken back): the claimed record's entities are kept active again.
        it->second.active.clear();
        activateLocked(shard, it->second, out);
        continue;
      }
      resetLocked(shards_[shard], shard, epoch, out);
      fresh.push_back(shard);
    }
  }
  run(out);
  if (!fresh.empty()) look(std::move(fresh), epoch, false);
}

void RememberedEntities::started(const EntityKey& key, ShardId shard, Epoch epoch, Done done) {
  enqueue(shard, epoch, Op{true, {key.type, key.id}, std::move(done)});
}

void RememberedEntities::forgotten(const EntityKey& key, ShardId shard, Epoch epoch, Done done) {
  enqueue(shard, epoch, Op{false, {key.type, key.id}, std::move(done)});
}

void RememberedEntities::enqueue(ShardId shard, Epoch epoch, Op op) {
  Actions out;
  {
    std::lock_guard lock(mu_);
    auto it = shards_.find(shard);
    if (it != shards_.end() && it->second.epoch > epoch) {
      // A call of an ownership older than the last take: the shard moved on.
      out.push_back([done = std::move(op.done), shard] { done(notOwned(shard)); });
    } else {
      if (it == shards_.end() || it->second.epoch < epoch) {
        // Taken without a take seen yet: the record is claimed before it is written.
        it = shards_.try_emplace(shard).first;
        resetLocked(it->second, shard, epoch, out);
      }
      Shard& s = it->second;
      const bool settled = s.known && s.recordEpoch == static_cast<std::int64_t>(epoch) &&
                           s.pending.empty() && !s.writing.count(op.key);
      if (op.start) {
        if (settled && s.stored.count(op.key)) {
          // Recorded already (kept active after a take, or a start whose turn was refused).
          s.active.insert(op.key);
          out.push_back([done = std::move(op.done)] { done(Status()); });
        } else {
          s.pending.push_back(std::move(op));
        }
      } else {
        s.active.erase(op.key);
        if (settled && !s.stored.count(op.key)) {
          out.push_back([done = std::move(op.done)] { done(Status()); });
        } else {
          s.pending.push_back(std::move(op));
        }
      }
      pumpLocked(shard, s, out);
    }
  }
  run(out);
}

RememberedEntities::Shard* RememberedEntities::findLocked(const Tag& tag) {
  auto it = shards_.find(tag.shard);
  if (it == shards_.end() || it->second.generation != tag.generation) return nullptr;
  return &it->second;
}

void RememberedEntities::resetLocked(Shard& s, ShardId shard, Epoch epoch, Actions& out) {
  failLocked(s.pending, notOwned(shard), out);
  s = Shard{};
  s.epoch = epoch;
  s.generation = ++generations_;
  s.claim = true;
}

void RememberedEntities::failLocked(std::deque<Op>& ops, const Status& status, Actions& out) {
  for (Op& op : ops) {
    if (op.done) out.push_back([done = std::move(op.done), status] { done(status); });
  }
  ops.clear();
}

void RememberedEntities::pumpLocked(ShardId shard, Shard& s, Actions& out) {
  if (s.busy || (s.pending.empty() && !s.claim)) return;
  const Tag tag{shard, s.epoch, s.generation};
  if (!s.known) {
    s.busy = true;
    out.push_back([this, tag] { read(tag); });
    return;
  }
  if (s.recordEpoch > static_cast<std::int64_t>(s.epoch)) {
    // A newer owner claimed the record: nothing of this ownership is written any more.
    failLocked(s.pending, notOwned(shard), out);
    s.claim = false;
    return;
  }
  std::vector<Op> batch;
  std::set<Key> next = applyLocked(shard, s, batch, out);
  // An existing record of an older owner is claimed even with nothing to add: its epoch fences
  // the older owner's writes still on their way.
  const bool claimIt = s.exists && s.recordEpoch < static_cast<std::int64_t>(s.epoch);
  if (next == s.stored && !claimIt) {
    for (Op& op : batch) {
      if (op.start) s.active.insert(op.key);
      if (op.done) out.push_back([done = std::move(op.done)] { done(Status()); });
    }
    s.claim = false;
    s.failures = s.conflicts = 0;
    activateLocked(shard, s, out);
    return;
  }
  s.busy = true;
  for (const Op& op : batch) {
    if (op.start) s.writing.insert(op.key);
  }
  const sharding::ShardEntities record{
      name_, shard, static_cast<std::int64_t>(s.epoch), {next.begin(), next.end()}};
  nlohmann::json object = sharding::shardEntitiesObject({ns_, name_, uid_}, record,
                                                        s.exists ? s.version : std::string());
  out.push_back([this, tag, object = std::move(object), create = !s.exists, next = std::move(next),
                 batch = std::move(batch)]() mutable {
    write(tag, std::move(object), create, std::move(next), std::move(batch));
  });
}

std::set<RememberedEntities::Key> RememberedEntities::applyLocked(ShardId shard, Shard& s,
                                                                  std::vector<Op>& batch,
                                                                  Actions& out) {
  std::set<Key> next = s.stored;
  std::size_t bytes = 0;
  for (const Key& k : next) bytes += sharding::entityBytes(k);
  const std::size_t others = mapTotalLocked(shard);
  while (!s.pending.empty()) {
    Op op = std::move(s.pending.front());
    s.pending.pop_front();
    if (!op.start) {
      if (next.erase(op.key) > 0) bytes -= sharding::entityBytes(op.key);
    } else if (!next.count(op.key)) {
      const std::size_t more = sharding::entityBytes(op.key);
      std::string full;
      if (next.size() + 1 > options_.record.maxEntities ||
          bytes + more > options_.record.maxBytes) {
        full = "shard " + std::to_string(shard) + " remembers as many entities as it may (" +
               std::to_string(options_.record.maxEntities) + ", or " +
               std::to_string(options_.record.maxBytes) + " bytes of types and ids)";
      } else if (others + next.size() + 1 > options_.maxPerMap) {
        full = "ShardMap " + name_ + " remembers as many entities as it may (" +
               std::to_string(options_.maxPerMap) + ")";
      }
      if (!full.empty()) {
        if (op.done)
          out.push_back([done = std::move(op.done), full] {
            done(resourceExhausted(full + "; forget some (Kshard-Passivate: true)"));
          });
        continue;
      }
      next.insert(op.key);
      bytes += more;
    }
    batch.push_back(std::move(op));
  }
  return next;
}

void RememberedEntities::activateLocked(ShardId shard, Shard& s, Actions& out) {
  if (!s.known || (s.exists && s.recordEpoch != static_cast<std::int64_t>(s.epoch))) {
    return;  // not read, or not claimed yet
  }
  for (const Key& k : s.stored) {
    if (s.active.count(k) || s.writing.count(k) || !types_.count(k.type)) continue;
    // A start waiting for the next write belongs to a turn that starts the entity itself.
    if (std::any_of(s.pending.begin(), s.pending.end(),
                    [&](const Op& op) { return op.start && op.key == k; })) {
      continue;
    }
    s.active.insert(k);
    out.push_back([this, key = EntityKey{k.type, k.id}, shard] { keepActive_(key, shard); });
  }
}

void RememberedEntities::retryLaterLocked(const Tag& tag, Shard& s) {
  s.busy = true;
  const int attempt = s.failures + std::max(0, s.conflicts - options_.conflictsAtOnce);
  const double grown = std::chrono::duration<double>(options_.retry.initial).count() *
                       std::pow(options_.retry.factor, std::max(attempt - 1, 0));
  const Duration base =
      std::min<Duration>(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(grown)),
                         options_.retry.max);
  const Duration delay = kube::jittered(base, options_.retry.jitter, random_);
  scheduler_.runAfter(delay, lifetime_.guard([this, tag] {
    Actions out;
    {
      std::lock_guard lock(mu_);
      Shard* now = findLocked(tag);
      if (now == nullptr) return;
      now->busy = false;
      pumpLocked(tag.shard, *now, out);
    }
    run(out);
  }));
}

std::size_t RememberedEntities::mapTotalLocked(ShardId except) const {
  std::size_t total = 0;
  for (const auto& [shard, count] : counts_) {
    if (shard != except) total += count;
  }
  return total;
}

bool RememberedEntities::stillOwned(const Tag& tag) const {
  const std::optional<Epoch> epoch = ownedEpoch_(tag.shard);
  return epoch && *epoch == tag.epoch;
}

std::size_t RememberedEntities::rememberedCount() const {
  std::vector<std::pair<Tag, std::size_t>> known;
  {
    std::lock_guard lock(mu_);
    for (const auto& [shard, s] : shards_) {
      if (s.known && s.recordEpoch == static_cast<std::int64_t>(s.epoch)) {
        known.push_back({Tag{shard, s.epoch, s.generation}, s.stored.size()});
      }
    }
  }
  std::size_t total = 0;
  for (const auto& [tag, count] : known) {
    if (stillOwned(tag)) total += count;
  }
  return total;
}

}  // namespace kshard::sidecar
