// MapHistory: the last versions of one ShardMap this replica persisted or read, kept as their
// canonical JSON text, and the answers of GET .../assignments?since=<rv>&want=<rv>: what a
// sidecar holding version `since` needs to hold the current one (docs/architecture.md, "How
// sidecars learn the map").
//
// Sidecars watch only the ShardMap's metadata; on each new resourceVersion they ask the leader
// for the changes since the version they hold (sharding/json_delta.h), which for a round that
// moves a few shards is a few KiB instead of the whole map. The answer is one of
//
//   {"kind":"ShardMapDelta","apiVersion":"kshard.io/v1alpha1","from":"<since>",
//    "resourceVersion":"<current>","wantKnown":true,"digest":"<16 hex>","changes":[...]}
//   {"kind":"ShardMapDelta",...,"resourceVersion":"<current>","digest":...}
//
// the second, without changes, when `since` is not a version this replica holds: the sidecar
// then reads the object from the API server, whose cache serves whole maps better than this
// process would (a new leader knows no version its sidecars hold). Only the leader records versions
// (a follower answers no read) and it forgets them when it stops leading. `digest` is textDigest of the
// current version's canonical text (sharding::toJson(map).dump()), which the sidecar checks
// after applying the changes. `wantKnown` says whether `want` is a version this replica has
// seen: when it has not, the sidecar's watch is ahead of this replica, and the sidecar reads the
// object from the API server instead.
//
// Every version here is one the API server stored: versions are recorded from the answers of
// status writes and from reads (ControllerContext::adopt), never from a map being built.
// Pure; not thread-safe (the controller's strand).
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "sharding/shard_map.h"

namespace kshard::manager {

class MapHistory {
 public:
  // Keeps the last `versions` versions, and at most `maxBytes` of their text (the current one
  // is kept whatever its size).
  explicit MapHistory(std::size_t versions = 8, std::size_t maxBytes = 32u << 20);

  // `map`, stored after every version recorded so far, is now the current one. A version
  // already recorded changes nothing (it is not newer than the current one).
  void record(const sharding::ShardMap& map);
  // Forgets every version (this replica stopped leading).
  void clear();
  bool knows(const std::string& resourceVersion) const;
  bool empty() const { return versions_.empty(); }
  const std::string& currentVersion() const;

  // The answer's body for a reader holding `since` ("" for none) whose watch announced `want`
  // ("" for none), shared by every reader that gets the same one. Precondition: !empty().
  std::shared_ptr<const std::string> answer(const std::string& since, const std::string& want);

  // Distinct deltas computed for the current version (each is computed once, then served).
  std::size_t deltasComputed() const { return deltas_.size(); }

 private:
  struct Version {
    std::string resourceVersion;
    std::string text;  // canonical JSON of the map
  };
  std::string header(bool wantKnown) const;
  const std::string& deltaFrom(const Version& base);

  const std::size_t keep_;
  const std::size_t maxBytes_;
  std::deque<Version> versions_;  // oldest first; back() is current
  std::size_t bytes_ = 0;
  std::string digest_;  // of the current version's text
  std::map<std::string, std::string> deltas_;  // since -> its "changes" to the current version
  // The answers given for the current version, by since and whether want was known.
  std::map<std::pair<std::string, bool>, std::shared_ptr<const std::string>> answers_;
};

}  // namespace kshard::manager
