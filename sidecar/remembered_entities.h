// RememberedEntities: the remembered entities of the shards this pod owns, kept in ShardEntities
// records on the API server (sharding/shard_entities.h, docs/decisions/0019-remembered-entities.md)
// so that the next owner of a shard starts them again after a move or a crash.
//
// The entity registry calls it (it is the registry's EntityRecorder):
//   started   a new entity of a remembered type is about to take its first turn: it is added to
//             its shard's record first (the turn waits), so a crash after the turn cannot lose it;
//   forgotten the app passivated it (Kshard-Passivate: true): it leaves the record;
// and the registry tells it which shards this pod takes (shardsTaken): it reads their records
// (one list of the map's records per take), claims each (writes this pod's epoch into it) and
// then keeps every entity listed active (`keepActive`: started now, without a message). A take
// at the same epoch (the lease's fence lifted) keeps them active again, without a read.
//
// Each shard's record is written by one chain of steps at a time, in order: read it (unless
// known), apply the waiting starts and forgets, write it with the resourceVersion read (a
// create when there is none). A conflict reads it again and retries at once; another error
// leaves the outcome unknown, so the record is read again before the next attempt, after a
// backoff. Several starts that wait together go in one write.
//
// Epoch fencing: the record holds the epoch of the owner that last wrote it. A pod whose epoch for
// the shard is lower (it lost the shard, and its write comes late) writes nothing: its start
// fails with FailedPrecondition, which the registry answers as "not owned" (the sender tries the
// new owner). The resourceVersion guards every write, so a late write never lands on a record a
// newer owner wrote. Ownership itself is never decided here: the registry owns shards, and only
// its owner starts an entity.
//
// What a start fails with: FailedPrecondition (a newer owner claimed the record, or this pod no
// longer owns the shard), ResourceExhausted (the record or the map is full: the limits below),
// Unavailable (the API server did not take the write after `attemptsPerStart` tries; the sender
// may retry). A forget fails Unavailable the same way: the entity then stays active, and recorded.
//
// Thread-safe. keepActive, ownedEpoch and every done callback run without the lock held (they
// may call back in). Destroy it only after the registry stops calling it; the destructor drops
// the callbacks still pending.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/logger.h"
#include "base/random.h"
#include "base/scheduler.h"
#include "kube/backoff.h"
#include "kube/client.h"
#include "kube/lifetime.h"
#include "sharding/shard_entities.h"
#include "sharding/shard_map.h"
#include "sidecar/entity_recorder.h"

namespace kshard::sidecar {

struct RememberedEntitiesOptions {
  sharding::ShardEntitiesLimits record;
  // Entities in the map's records, all shards together, as this pod last listed them plus what it
  // wrote since: a new entity beyond it is refused.
  std::size_t maxPerMap = 100000;
  // A shard taken without a record is listed again after this: a write of the previous owner
  // whose outcome was unknown (or that was still on its way) may have created one since.
  Duration secondLook = std::chrono::seconds(60);
  // Between attempts after an API error (not a conflict, which is retried at once).
  kube::BackoffPolicy retry{std::chrono::milliseconds(200), std::chrono::seconds(10), 2.0, 0.5};
  // API errors in a row before a waiting start fails (Unavailable).
  int attemptsPerStart = 3;
  // Conflicts in a row retried at once; beyond, with the backoff.
  int conflictsAtOnce = 5;
  std::uint64_t seed = 1;  // of the backoff's jitter
  // Called (under no lock) for every record write with whether it was stored; for metrics.
  std::function<void(bool stored)> onWrite;
};

class RememberedEntities final : public EntityRecorder {
 public:
  // Starts `key` without a message and pins it (EntityRegistry::keepActive).
  using KeepActive = std::function<void(const EntityKey& key, ShardId shard)>;
  // This pod's epoch for the shard, when it owns it (EntityRegistry::ownedEpoch).
  using OwnedEpoch = std::function<std::optional<Epoch>(ShardId shard)>;

  // `map`: the ShardMap's namespace (the records are in it) and name; its uid, when known.
  RememberedEntities(kube::Client& api, Scheduler& scheduler, sharding::ShardMapOwner map,
                     KeepActive keepActive, OwnedEpoch ownedEpoch, Logger logger,
                     RememberedEntitiesOptions options = {});
  ~RememberedEntities() override;
  RememberedEntities(const RememberedEntities&) = delete;
  RememberedEntities& operator=(const RememberedEntities&) = delete;

  // Follows the watched ShardMap: its name and uid (the records' owner) and
  // spec.rememberedEntityTypes.
  void follow(const sharding::ShardMap& map);
  // This pod took `shards` at `epoch` (EntityRegistry::addShardsTakenListener).
  void shardsTaken(std::vector<ShardId> shards, Epoch epoch);

  bool remembered(const std::string& type) override;
  void started(const EntityKey& key, ShardId shard, Epoch epoch,
               std::function<void(Status)> done) override;
  void forgotten(const EntityKey& key, ShardId shard, Epoch epoch,
                 std::function<void(Status)> done) override;

  // The entities recorded in the records of the shards this pod owns (for the gauge).
  std::size_t rememberedCount() const;

 private:
  using Key = sharding::RememberedEntity;
  using Done = std::function<void(Status)>;
  using Actions = std::vector<std::function<void()>>;
  struct Op {
    bool start = true;  // false: forget
    Key key;
    Done done;
  };
  // One shard's record as this pod knows it, for this pod's ownership at `epoch`.
  struct Shard {
    Epoch epoch = 0;
    std::uint64_t generation = 0;  // a new one at each take: older callbacks find it stale
    bool known = false;            // the fields below hold a read or a write at this epoch
    bool exists = false;
    std::string version;  // its resourceVersion, when it exists
    std::int64_t recordEpoch = 0;
    std::set<Key> stored;
    std::set<Key> active;    // kept active, or started through started(), at `epoch`
    std::deque<Op> pending;  // waiting for the next write
    std::set<Key> writing;   // starts in the write in flight
    bool busy = false;       // a read or a write is in flight, or a retry waits
    bool claim = false;      // taken: the record must carry `epoch` (when it exists)
    bool looked = false;     // the second look is done or scheduled
    int failures = 0;        // API errors in a row
    int conflicts = 0;       // conflicts in a row
  };
  // Where a step's answer goes: the shard, and the ownership it was made for.
  struct Tag {
    ShardId shard;
    Epoch epoch;
    std::uint64_t generation;
  };

  static Status notOwned(ShardId shard);
  void enqueue(ShardId shard, Epoch epoch, Op op);
  // The shard's state for the ownership of the tag; nullptr once another take replaced it.
  Shard* findLocked(const Tag& tag);
  // A new take at `epoch`: the ops of the older one fail (not owned), the record is claimed.
  void resetLocked(Shard& s, ShardId shard, Epoch epoch, Actions& out);
  // The next step of the shard's chain, if one is due and none runs.
  void pumpLocked(ShardId shard, Shard& s, Actions& out);
  // Applies the waiting ops to the stored set; the ops that fit go in `batch`.
  std::set<Key> applyLocked(ShardId shard, Shard& s, std::vector<Op>& batch, Actions& out);
  // Keeps active every stored entity of a remembered type not yet active here.
  void activateLocked(ShardId shard, Shard& s, Actions& out);
  void failLocked(std::deque<Op>& ops, const Status& status, Actions& out);
  void retryLaterLocked(const Tag& tag, Shard& s);
  // A read or write failed (not a lost race): counted, the waiting ops failed once they have
  // had their attempts, and tried again after the backoff.
  void apiFailedLocked(const Tag& tag, Shard& s, const char* step, const Status& error,
                       Actions& out);

  // The steps (sent without the lock) and their answers.
  void read(Tag tag);
  void onRead(Tag tag, StatusOr<nlohmann::json> answer);
  void write(Tag tag, nlohmann::json object, bool create, std::set<Key> next,
             std::vector<Op> batch);
  void onWrite(Tag tag, StatusOr<nlohmann::json> answer, std::set<Key> next, std::vector<Op> batch);
  // Lists the map's records and seeds the taken shards' states from them.
  void look(std::vector<ShardId> shards, Epoch epoch, bool second);
  void onLook(std::vector<ShardId> shards, Epoch epoch, bool second,
              StatusOr<kube::ListResult> list);
  // Takes a stored record (or its absence: null) as the shard's known state.
  void takeRecordLocked(Shard& s, ShardId shard, const nlohmann::json* object);
  // True when this pod still owns the shard at the tag's epoch (asked without the lock).
  bool stillOwned(const Tag& tag) const;
  std::size_t mapTotalLocked(ShardId except) const;
  static void run(Actions& actions);

  kube::Client& api_;
  Scheduler& scheduler_;
  const std::string ns_;
  const std::string name_;  // the ShardMap's
  const KeepActive keepActive_;
  const OwnedEpoch ownedEpoch_;
  const Logger log_;
  const RememberedEntitiesOptions options_;

  mutable std::mutex mu_;
  SeededRandom random_;  // the backoff's jitter, under mu_
  std::string uid_;      // the ShardMap's, for the records' owner reference
  std::set<std::string> types_;
  std::map<ShardId, Shard> shards_;
  // Entities per shard in the map's records, all pods: the last list, and this pod's writes since.
  std::map<ShardId, std::size_t> counts_;
  std::uint64_t generations_ = 0;
  kube::Lifetime lifetime_;  // every callback; ended first in the destructor
};

}  // namespace kshard::sidecar
