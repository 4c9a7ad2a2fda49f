#include "operator/map_history.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "sharding/json_delta.h"
#include "sharding/shard_map_json.h"

namespace kshard::manager {

using nlohmann::json;

MapHistory::MapHistory(std::size_t versions, std::size_t maxBytes)
    : keep_(versions < 1 ? 1 : versions), maxBytes_(maxBytes) {}

void MapHistory::record(const sharding::ShardMap& map) {
  const std::string& rv = map.metadata.resourceVersion;
  // Versions are recorded in the order the API server stored them (answers of this replica's
  // writes and quorum reads); one seen again is older than or equal to the current one, and
  // never becomes current again: an answer is never older than a version it says it knows.
  if (knows(rv)) return;
  std::string text = sharding::toJson(map).dump();
  digest_ = sharding::textDigest(text);
  bytes_ += text.size();
  versions_.push_back({rv, std::move(text)});
  while (versions_.size() > keep_ || (versions_.size() > 1 && bytes_ > maxBytes_)) {
    bytes_ -= versions_.front().text.size();
    versions_.pop_front();
  }
  deltas_.clear();
  answers_.clear();
}

void MapHistory::clear() {
  versions_.clear();
  deltas_.clear();
  answers_.clear();
  bytes_ = 0;
  digest_.clear();
}

bool MapHistory::knows(const std::string& resourceVersion) const {
  for (const Version& v : versions_) {
    if (v.resourceVersion == resourceVersion) return true;
  }
  return false;
}

const std::string& MapHistory::currentVersion() const { return versions_.back().resourceVersion; }

std::string MapHistory::header(bool wantKnown) const {
  return R"({"kind":"ShardMapDelta","apiVersion":")" + std::string(sharding::kShardMapApiVersion) +
         R"(","resourceVersion":)" + json(currentVersion()).dump() +
         R"(,"wantKnown":)" + (wantKnown ? "true" : "false") + R"(,"digest":")" + digest_ + "\"";
}

const std::string& MapHistory::deltaFrom(const Version& base) {
  auto it = deltas_.find(base.resourceVersion);
  if (it != deltas_.end()) return it->second;
  const json from = json::parse(base.text);
  const json to = json::parse(versions_.back().text);
  return deltas_.emplace(base.resourceVersion, sharding::diffJson(from, to).dump()).first->second;
}

std::shared_ptr<const std::string> MapHistory::answer(const std::string& since,
                                                      const std::string& want) {
  const bool wantKnown = want.empty() || knows(want);
  auto& cached = answers_[{since, wantKnown}];
  if (cached) return cached;
  const Version& current = versions_.back();
  std::string body = header(wantKnown);
  const auto base = since.empty() ? versions_.end()
                                  : std::find_if(versions_.begin(), versions_.end(),
                                                 [&](const Version& v) {
                                                   return v.resourceVersion == since;
                                                 });
  if (base != versions_.end()) {
    body += R"(,"from":)" + json(since).dump() + R"(,"changes":)" +
            (&*base == &current ? std::string("[]") : deltaFrom(*base));
  }
  // Without changes for a version this replica does not hold, and never the whole map: a
  // thousand sidecars asking at once (a new leader, which holds no version they hold) would hold
  // a thousand copies in this process. The API server's cache serves it.
  cached = std::make_shared<const std::string>(body + "}");
  return cached;
}

}  // namespace kshard::manager
