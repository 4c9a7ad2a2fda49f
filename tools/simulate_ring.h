// RingManager: consistent hashing with virtual nodes, as Dapr's placement service assigns actors,
// for `kshardctl simulate`.
//
// Each pod in the ring has `virtualNodes` points at ringHash(address + "#" + i), i = 0..n-1; a
// shard belongs to the first point at or after ringHash(decimal shard id), wrapping around. The
// address is the pod's IP and port, so a pod that replaces another (rolling update, crash) has
// new points and takes other shards. Dapr (pkg/placement/hashing) keys points by host address
// and replica index and hashes with BLAKE2b; only the uniformity of the hash matters for these
// figures, so we use ringHash below. A point that collides with an existing one is skipped.
//
// Membership follows the pods: a pod joins the ring when ready (registers with the placement
// service) and leaves when it unregisters after its drain or when its death is noticed; a
// draining pod keeps its points (and its shards) until it leaves. Changes at one instant are
// disseminated as one table update (one round); moves take effect at once. The ring never
// rebalances by itself, so it settles as soon as its members stop changing.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "base/scheduler.h"
#include "tools/simulate_instant.h"
#include "tools/simulate_manager.h"

namespace kshard::tools {

// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
std::uint64_t fnv1a64(std::string_view text);
// MurmurHash3's 64-bit finalizer (fmix64): a bijection that spreads every input bit over all
// output bits.
std::uint64_t fmix64(std::uint64_t h);
// fmix64(fnv1a64(text)): ring positions. FNV-1a alone mixes the last bytes of a key poorly into
// the high bits (points "...#1", "...#2" of one pod would sit next to each other on the ring).
std::uint64_t ringHash(std::string_view text);

// The points of a ring, sorted by hash, in chunks of a few hundred (a two-level sorted array):
// one insert or erase costs a binary search over the chunks plus a short move within one, with
// good locality; building from a sorted list is linear. (A std::map of two million points, at
// 20,000 pods, spent nearly all its time on cache misses.)
class RingPoints {
 public:
  struct Point {
    std::uint64_t hash = 0;
    SimPod pod = kNoSimPod;
  };

  // Replaces every point. Precondition: sorted by hash, no hash twice.
  void assign(const std::vector<Point>& sorted);
  // False (and no change) when a point with that hash exists.
  bool insert(Point point);
  // The pod whose point is at `hash`, or kNoSimPod.
  SimPod at(std::uint64_t hash) const;
  void erase(std::uint64_t hash);
  // The nearest point counter-clockwise of `hash` (largest hash below it, else the largest of
  // all) and clockwise of it (smallest above it, else the smallest). Precondition: not empty.
  const Point& before(std::uint64_t hash) const;
  const Point& after(std::uint64_t hash) const;
  std::size_t size() const { return size_; }
  // Every point in hash order.
  std::vector<Point> points() const;

 private:
  std::size_t chunkFor(std::uint64_t hash) const;

  std::vector<std::vector<Point>> chunks_;  // each non-empty and sorted, chunk after chunk
  std::vector<std::uint64_t> firsts_;       // first hash of each chunk
  std::size_t size_ = 0;
};

class RingManager final : public SimulatedManager {
 public:
  RingManager(Scheduler& scheduler, OwnershipLedger& ledger, const SimulatedDeployment& deployment,
              std::int32_t virtualNodes);

  void startWith(const std::vector<SimPod>& pods) override;
  void podReady(SimPod pod) override;
  void podTerminating(SimPod pod) override;
  void podCrashed(SimPod pod) override;
  void podGone(SimPod pod) override;
  bool settled() const override { return !update_.pending(); }
  // Forces the point-by-point or the rebuild path of updates (tests compare the two).
  enum class UpdatePath { kAuto, kPointByPoint, kRebuild };
  void setUpdatePath(UpdatePath path) { path_ = path; }

  // The pod that owns `shard` on the ring as it is now (kNoSimPod when the ring is empty).
  SimPod ringOwner(sharding::ShardId shard) const;

 private:
  void join(SimPod pod);
  void leave(SimPod pod);
  void setOwner(std::size_t shardIndex, SimPod pod);
  // Sets the ring owner of the shards whose hash lies in (after, upTo], wrapping around.
  void claim(std::uint64_t after, std::uint64_t upTo, SimPod pod);
  // Applies the instant's leaves and joins: point by point for a few pods, by rebuilding the
  // ring and recomputing every owner when many pods change (same result, cheaper in bulk).
  void update();
  void rebuild();
  // Hands the changed shards to their ring owners in the ledger: one table update.
  void publish();

  std::int32_t virtualNodes_;
  RingPoints ring_;
  std::vector<std::pair<std::uint64_t, sharding::ShardId>> shardHashes_;  // sorted
  std::vector<SimPod> ringOwner_;                                         // by shard - 1
  std::vector<sharding::ShardId> touched_;
  std::vector<bool> isTouched_;
  std::vector<SimPod> joining_;
  std::vector<SimPod> leaving_;
  EndOfInstant update_;  // the instant's table update
  UpdatePath path_ = UpdatePath::kAuto;
};

}  // namespace kshard::tools
