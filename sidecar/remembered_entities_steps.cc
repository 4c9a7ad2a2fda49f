// RememberedEntities: the steps of a shard's chain on the API server — the read, the write, and
// the list of the map's records on a take — and what their answers do.
#include "kube/api_request.h"
#include "sidecar/remembered_entities.h"

namespace kshard::sidecar {
namespace {

using nlohmann::json;

std::string resourceVersionOf(const json& object) {
  return object.value("metadata", json::object()).value("resourceVersion", "");
}

// A write that lost to another one (a newer version, a record created or deleted meanwhile): the
// record is read again and the write retried at once.
bool lostRace(const Status& s) {
  return s.code() == StatusCode::kConflict || s.code() == StatusCode::kAlreadyExists ||
         s.code() == StatusCode::kNotFound;
}

}  // namespace

void RememberedEntities::read(Tag tag) {
  // No resourceVersion: a quorum read, never the watch cache's older copy.
  api_.callAsync(
      kube::getRequest(kube::resources::kShardEntities, ns_,
                       sharding::shardEntitiesName(name_, tag.shard)),
      lifetime_.guard([this, tag](StatusOr<json> answer) { onRead(tag, std::move(answer)); }));
}

void RememberedEntities::onRead(Tag tag, StatusOr<json> answer) {
  const bool owned = stillOwned(tag);
  Actions out;
  {
    std::lock_guard lock(mu_);
    Shard* s = findLocked(tag);
    if (s == nullptr) return;
    if (!owned) {
      failLocked(s->pending, notOwned(tag.shard), out);
      shards_.erase(tag.shard);
    } else if (!answer.ok() && answer.status().code() != StatusCode::kNotFound) {
      apiFailedLocked(tag, *s, "read", answer.status(), out);
    } else {
      // Failures count on until a write goes through: a read between failed writes succeeds.
      s->busy = false;
      takeRecordLocked(*s, tag.shard, answer.ok() ? &*answer : nullptr);
      activateLocked(tag.shard, *s, out);
      pumpLocked(tag.shard, *s, out);
    }
  }
  run(out);
}

void RememberedEntities::apiFailedLocked(const Tag& tag, Shard& s, const char* step,
                                         const Status& error, Actions& out) {
  log_.warn("cannot reach a shard's remembered entities; retrying",
            {{"shard", tag.shard}, {"step", step}, {"error", error.toString()}});
  if (++s.failures >= options_.attemptsPerStart) {
    failLocked(s.pending,
               unavailable("cannot " + std::string(step) + " the remembered entities of shard " +
                           std::to_string(tag.shard) + ": " + error.toString()),
               out);
  }
  retryLaterLocked(tag, s);
}

void RememberedEntities::takeRecordLocked(Shard& s, ShardId shard, const json* object) {
  s.known = true;
  s.exists = object != nullptr;
  s.version = object ? resourceVersionOf(*object) : "";
  s.recordEpoch = 0;
  s.stored.clear();
  if (object == nullptr) {
    counts_.erase(shard);
    return;
  }
  StatusOr<sharding::ShardEntities> record = sharding::shardEntitiesFromJson(*object);
  if (record.ok() && (record->shard != shard || record->shardMap != name_)) {
    record = invalidArgument("it names shard " + std::to_string(record->shard) + " of ShardMap " +
                             record->shardMap);
  }
  if (!record.ok()) {
    // Only this pod may write it now; what it held cannot be read, and is replaced by the next
    // write (which claims it).
    log_.warn("a ShardEntities record is not one of this shard's; it will be rewritten",
              {{"shard", shard}, {"error", record.status().toString()}});
  } else {
    s.recordEpoch = record->epoch;
    s.stored = {record->entities.begin(), record->entities.end()};
  }
  counts_[shard] = s.stored.size();
}

void RememberedEntities::write(Tag tag, json object, bool create, std::set<Key> next,
                               std::vector<Op> batch) {
  // The update carries the resourceVersion read: it lands only on the record this pod read.
  kube::ApiRequest request =
      create ? kube::createRequest(kube::resources::kShardEntities, ns_, std::move(object))
             : kube::updateRequest(kube::resources::kShardEntities, ns_, std::move(object));
  api_.callAsync(std::move(request),
                 lifetime_.guard([this, tag, next = std::move(next),
                                  batch = std::move(batch)](StatusOr<json> answer) mutable {
                   onWrite(tag, std::move(answer), std::move(next), std::move(batch));
                 }));
}

void RememberedEntities::onWrite(Tag tag, StatusOr<json> answer, std::set<Key> next,
                                 std::vector<Op> batch) {
  if (options_.onWrite) options_.onWrite(answer.ok());
  const bool owned = stillOwned(tag);
  Actions out;
  {
    std::lock_guard lock(mu_);
    Shard* s = findLocked(tag);
    if (s != nullptr) {
      for (const Op& op : batch) {
        if (op.start) s->writing.erase(op.key);
      }
    }
    if (s == nullptr || !owned) {
      // Taken again, or lost, meanwhile: this write's ownership is over.
      std::deque<Op> ops(std::make_move_iterator(batch.begin()),
                         std::make_move_iterator(batch.end()));
      if (s != nullptr)
        ops.insert(ops.end(), std::make_move_iterator(s->pending.begin()),
                   std::make_move_iterator(s->pending.end()));
      failLocked(ops, notOwned(tag.shard), out);
      if (s != nullptr) shards_.erase(tag.shard);
    } else if (answer.ok()) {
      s->known = s->exists = true;
      s->version = resourceVersionOf(*answer);
      s->recordEpoch = static_cast<std::int64_t>(tag.epoch);
      s->stored = std::move(next);
      s->failures = s->conflicts = 0;
      s->claim = false;
      s->busy = false;
      counts_[tag.shard] = s->stored.size();
      for (Op& op : batch) {
        if (op.start) s->active.insert(op.key);
        if (op.done) out.push_back([done = std::move(op.done)] { done(Status()); });
      }
      activateLocked(tag.shard, *s, out);
      pumpLocked(tag.shard, *s, out);
    } else {
      // Read again before the next attempt: a conflict means another version, and any other
      // error may have been stored or not.
      s->known = false;
      for (auto op = batch.rbegin(); op != batch.rend(); ++op)
        s->pending.push_front(std::move(*op));
      if (lostRace(answer.status())) {
        if (++s->conflicts <= options_.conflictsAtOnce) {
          s->busy = false;
          pumpLocked(tag.shard, *s, out);
        } else {
          retryLaterLocked(tag, *s);
        }
      } else {
        apiFailedLocked(tag, *s, "write", answer.status(), out);
      }
    }
  }
  run(out);
}

void RememberedEntities::look(std::vector<ShardId> shards, Epoch epoch, bool second) {
  kube::ListOptions options;
  options.labelSelector = std::string(sharding::kShardMapLabel) + "=" + name_;
  // A quorum list (no resourceVersion): what the previous owner wrote last is in it.
  api_.listAllAsync(kube::resources::kShardEntities, ns_, options,
                    lifetime_.guard([this, shards = std::move(shards), epoch,
                                     second](StatusOr<kube::ListResult> list) mutable {
                      onLook(std::move(shards), epoch, second, std::move(list));
                    }));
}

void RememberedEntities::onLook(std::vector<ShardId> shards, Epoch epoch, bool second,
                                StatusOr<kube::ListResult> list) {
  Actions out;
  std::vector<ShardId> absent;
  {
    std::lock_guard lock(mu_);
    std::map<ShardId, const json*> found;
    if (!list.ok()) {
      log_.warn("cannot list the remembered entities of the shards taken; reading them one by one",
                {{"shards", static_cast<std::uint64_t>(shards.size())},
                 {"error", list.status().toString()}});
    } else {
      counts_.clear();
      for (const json& item : list->items) {
        auto record = sharding::shardEntitiesFromJson(item);
        if (!record.ok() || record->shardMap != name_) continue;
        counts_[record->shard] = record->entities.size();
        found[record->shard] = &item;
      }
    }
    for (ShardId shard : shards) {
      auto it = shards_.find(shard);
      if (it == shards_.end() || it->second.epoch != epoch) continue;
      Shard& s = it->second;
      if (list.ok() && !s.known && !s.busy) {
        auto f = found.find(shard);
        takeRecordLocked(s, shard, f == found.end() ? nullptr : f->second);
        if (!s.exists && !second && !std::exchange(s.looked, true)) absent.push_back(shard);
        activateLocked(shard, s, out);
      }
      // A failed list leaves the record unknown: the chain reads it itself.
      pumpLocked(shard, s, out);
    }
  }
  run(out);
  if (absent.empty()) return;
  scheduler_.runAfter(options_.secondLook, lifetime_.guard([this, absent, epoch] {
    std::vector<ShardId> again;
    {
      std::lock_guard lock(mu_);
      for (ShardId shard : absent) {
        auto it = shards_.find(shard);
        if (it == shards_.end() || it->second.epoch != epoch) continue;
        Shard& s = it->second;
        if (!s.known || s.exists || s.busy) continue;  // read or written since
        s.known = false;
        s.claim = true;
        again.push_back(shard);
      }
    }
    if (!again.empty()) look(std::move(again), epoch, true);
  }));
}

}  // namespace kshard::sidecar
