#include "tools/simulate_ring.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace kshard::tools {
namespace {

// Chunks split when they reach twice this size.
constexpr std::size_t kChunk = 256;

bool hashLess(const RingPoints::Point& p, std::uint64_t h) { return p.hash < h; }
bool lessHash(std::uint64_t h, const RingPoints::Point& p) { return h < p.hash; }

std::uint64_t pointHash(const std::string& address, std::int32_t i) {
  return ringHash(address + "#" + std::to_string(i));
}

}  // namespace

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint64_t fmix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

std::uint64_t ringHash(std::string_view text) { return fmix64(fnv1a64(text)); }

void RingPoints::assign(const std::vector<Point>& sorted) {
  chunks_.clear();
  firsts_.clear();
  for (std::size_t i = 0; i < sorted.size(); i += kChunk) {
    const auto end = std::min(sorted.size(), i + kChunk);
    chunks_.emplace_back(sorted.begin() + static_cast<std::ptrdiff_t>(i),
                         sorted.begin() + static_cast<std::ptrdiff_t>(end));
    firsts_.push_back(sorted[i].hash);
  }
  size_ = sorted.size();
}

std::size_t RingPoints::chunkFor(std::uint64_t hash) const {
  // The last chunk whose first hash is <= hash; the first chunk for hashes below all.
  const auto it = std::upper_bound(firsts_.begin(), firsts_.end(), hash);
  return it == firsts_.begin() ? 0 : static_cast<std::size_t>(it - firsts_.begin()) - 1;
}

bool RingPoints::insert(Point point) {
  if (chunks_.empty()) {
    chunks_.push_back({point});
    firsts_.push_back(point.hash);
    size_ = 1;
    return true;
  }
  const std::size_t c = chunkFor(point.hash);
  std::vector<Point>& chunk = chunks_[c];
  const auto it = std::lower_bound(chunk.begin(), chunk.end(), point.hash, hashLess);
  if (it != chunk.end() && it->hash == point.hash) return false;
  chunk.insert(it, point);
  firsts_[c] = chunk.front().hash;
  ++size_;
  if (chunk.size() >= 2 * kChunk) {
    std::vector<Point> upper(chunk.begin() + kChunk, chunk.end());
    chunk.resize(kChunk);
    const auto at = static_cast<std::ptrdiff_t>(c) + 1;
    firsts_.insert(firsts_.begin() + at, upper.front().hash);
    chunks_.insert(chunks_.begin() + at, std::move(upper));
  }
  return true;
}

SimPod RingPoints::at(std::uint64_t hash) const {
  if (chunks_.empty()) return kNoSimPod;
  const std::vector<Point>& chunk = chunks_[chunkFor(hash)];
  const auto it = std::lower_bound(chunk.begin(), chunk.end(), hash, hashLess);
  return it != chunk.end() && it->hash == hash ? it->pod : kNoSimPod;
}

void RingPoints::erase(std::uint64_t hash) {
  if (chunks_.empty()) return;
  const std::size_t c = chunkFor(hash);
  std::vector<Point>& chunk = chunks_[c];
  const auto it = std::lower_bound(chunk.begin(), chunk.end(), hash, hashLess);
  if (it == chunk.end() || it->hash != hash) return;
  chunk.erase(it);
  --size_;
  if (chunk.empty()) {
    chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(c));
    firsts_.erase(firsts_.begin() + static_cast<std::ptrdiff_t>(c));
  } else {
    firsts_[c] = chunk.front().hash;
  }
}

const RingPoints::Point& RingPoints::before(std::uint64_t hash) const {
  const std::size_t c = chunkFor(hash);
  const std::vector<Point>& chunk = chunks_[c];
  const auto it = std::lower_bound(chunk.begin(), chunk.end(), hash, hashLess);
  if (it != chunk.begin()) return *std::prev(it);
  return c > 0 ? chunks_[c - 1].back() : chunks_.back().back();
}

const RingPoints::Point& RingPoints::after(std::uint64_t hash) const {
  const std::size_t c = chunkFor(hash);
  const std::vector<Point>& chunk = chunks_[c];
  const auto it = std::upper_bound(chunk.begin(), chunk.end(), hash, lessHash);
  if (it != chunk.end()) return *it;
  return c + 1 < chunks_.size() ? chunks_[c + 1].front() : chunks_.front().front();
}

std::vector<RingPoints::Point> RingPoints::points() const {
  std::vector<Point> all;
  all.reserve(size_);
  for (const auto& chunk : chunks_) all.insert(all.end(), chunk.begin(), chunk.end());
  return all;
}

RingManager::RingManager(Scheduler& scheduler, OwnershipLedger& ledger,
                         const SimulatedDeployment& deployment, std::int32_t virtualNodes)
    : SimulatedManager(scheduler, ledger, deployment),
      virtualNodes_(virtualNodes),
      ringOwner_(static_cast<std::size_t>(ledger.shardCount()), kNoSimPod),
      isTouched_(static_cast<std::size_t>(ledger.shardCount()), false),
      update_(scheduler, [this] { update(); }) {
  shardHashes_.reserve(static_cast<std::size_t>(ledger.shardCount()));
  for (sharding::ShardId s = 1; s <= ledger.shardCount(); ++s) {
    shardHashes_.emplace_back(ringHash(std::to_string(s)), s);
  }
  std::sort(shardHashes_.begin(), shardHashes_.end());
}

SimPod RingManager::ringOwner(sharding::ShardId shard) const {
  return ringOwner_[static_cast<std::size_t>(shard - 1)];
}

void RingManager::setOwner(std::size_t shardIndex, SimPod pod) {
  ringOwner_[shardIndex] = pod;
  if (!isTouched_[shardIndex]) {
    isTouched_[shardIndex] = true;
    touched_.push_back(static_cast<sharding::ShardId>(shardIndex + 1));
  }
}

void RingManager::claim(std::uint64_t after, std::uint64_t upTo, SimPod pod) {
  const auto firstAbove = [&](std::uint64_t h) {
    return std::upper_bound(shardHashes_.begin(), shardHashes_.end(), h,
                            [](std::uint64_t v, const auto& e) { return v < e.first; });
  };
  const auto give = [&](auto from, auto to) {
    for (auto it = from; it != to; ++it) setOwner(static_cast<std::size_t>(it->second - 1), pod);
  };
  if (after < upTo) {
    give(firstAbove(after), firstAbove(upTo));
  } else {
    // The arc wraps past the top of the hash space (after == upTo: the whole ring).
    give(firstAbove(after), shardHashes_.end());
    give(shardHashes_.begin(), firstAbove(upTo));
  }
}

void RingManager::join(SimPod pod) {
  const std::string& address = deployment_.pod(pod).address;
  for (std::int32_t i = 0; i < virtualNodes_; ++i) {
    const std::uint64_t h = pointHash(address, i);
    if (!ring_.insert({h, pod})) continue;  // collision: the point stays with its first pod
    // The new point takes the arc from its predecessor (the whole ring if it is alone).
    claim(ring_.size() == 1 ? h : ring_.before(h).hash, h, pod);
  }
}

void RingManager::leave(SimPod pod) {
  const std::string& address = deployment_.pod(pod).address;
  for (std::int32_t i = 0; i < virtualNodes_; ++i) {
    const std::uint64_t h = pointHash(address, i);
    if (ring_.at(h) != pod) continue;
    if (ring_.size() == 1) {
      ring_.erase(h);
      claim(h, h, kNoSimPod);
      continue;
    }
    // The point's arc goes to the next point clockwise.
    const std::uint64_t pred = ring_.before(h).hash;
    const SimPod heir = ring_.after(h).pod;
    ring_.erase(h);
    claim(pred, h, heir);
  }
}

void RingManager::rebuild() {
  std::vector<bool> leaving(deployment_.pods().size(), false);
  for (SimPod p : leaving_) leaving[static_cast<std::size_t>(p)] = true;
  std::vector<RingPoints::Point> kept;
  for (const RingPoints::Point& p : ring_.points()) {
    if (!leaving[static_cast<std::size_t>(p.pod)]) kept.push_back(p);
  }
  // Joining points in join order, so that on a collision the earlier one wins, as point by point.
  std::vector<RingPoints::Point> joined;
  for (SimPod pod : joining_) {
    for (std::int32_t i = 0; i < virtualNodes_; ++i) {
      joined.push_back({pointHash(deployment_.pod(pod).address, i), pod});
    }
  }
  std::stable_sort(joined.begin(), joined.end(),
                   [](const auto& a, const auto& b) { return a.hash < b.hash; });
  std::vector<RingPoints::Point> merged;
  merged.reserve(kept.size() + joined.size());
  auto k = kept.begin();
  for (auto j = joined.begin(); j != joined.end(); ++j) {
    if (j != joined.begin() && std::prev(j)->hash == j->hash) continue;
    while (k != kept.end() && k->hash < j->hash) merged.push_back(*k++);
    if (k != kept.end() && k->hash == j->hash) continue;  // an existing point keeps its place
    merged.push_back(*j);
  }
  merged.insert(merged.end(), k, kept.end());
  ring_.assign(merged);
  // Every shard's owner: the first point at or after its hash, wrapping around. Both lists are
  // sorted, so one merged walk does it.
  auto point = merged.begin();
  for (const auto& [hash, shard] : shardHashes_) {
    while (point != merged.end() && point->hash < hash) ++point;
    const SimPod owner =
        merged.empty() ? kNoSimPod : (point != merged.end() ? point->pod : merged.front().pod);
    const auto i = static_cast<std::size_t>(shard - 1);
    if (ringOwner_[i] != owner) setOwner(i, owner);
  }
}

void RingManager::update() {
  const auto changing =
      static_cast<std::size_t>(virtualNodes_) * (joining_.size() + leaving_.size());
  const bool bulk = path_ == UpdatePath::kRebuild ||
                    (path_ == UpdatePath::kAuto && changing * 8 >= ring_.size() + changing);
  if (bulk) {
    rebuild();
  } else {
    // Leaves before joins; the ring's final state does not depend on the order.
    for (SimPod p : leaving_) leave(p);
    for (SimPod p : joining_) join(p);
  }
  leaving_.clear();
  joining_.clear();
  publish();
}

void RingManager::publish() {
  for (sharding::ShardId s : touched_) {
    const auto i = static_cast<std::size_t>(s - 1);
    isTouched_[i] = false;
    if (ringOwner_[i] == kNoSimPod) {
      ledger_.release(s);
    } else {
      ledger_.assign(s, ringOwner_[i]);
    }
  }
  touched_.clear();
  ledger_.commit(now());
}

void RingManager::startWith(const std::vector<SimPod>& pods) {
  joining_ = pods;
  update();
}

void RingManager::podReady(SimPod pod) {
  joining_.push_back(pod);
  update_.request();
}

void RingManager::podTerminating(SimPod /*pod*/) {
  // A draining pod keeps its points until it unregisters.
}

void RingManager::podCrashed(SimPod /*pod*/) {
  // The placement service learns of a crash when the death is noticed.
}

void RingManager::podGone(SimPod pod) {
  leaving_.push_back(pod);
  update_.request();
}

}  // namespace kshard::tools
