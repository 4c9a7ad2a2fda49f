#include "sharding/json_delta.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kshard::sharding {
namespace {

using nlohmann::json;

// Builds the op list of one array edit, merging neighbouring copies, skips and inserts.
class OpWriter {
 public:
  void copy(std::int64_t n) { run(n, n > 0); }
  void skip(std::int64_t n) { run(-n, false); }
  void insert(const json& element) {
    if (ops_.empty() || !ops_.back().is_array()) ops_.push_back(json::array());
    ops_.back().push_back(element);
  }
  void merge(json op) { ops_.push_back(std::move(op)); }
  json take() {
    // Old elements after the last op are dropped: a trailing skip says nothing.
    if (!ops_.empty() && ops_.back().is_number_integer() && ops_.back().get<std::int64_t>() < 0) {
      ops_.erase(ops_.end() - 1);
    }
    return std::move(ops_);
  }

 private:
  void run(std::int64_t signedCount, bool positive) {
    if (!ops_.empty() && ops_.back().is_number_integer()) {
      const auto last = ops_.back().get<std::int64_t>();
      if ((last > 0) == positive) {
        ops_.back() = last + signedCount;
        return;
      }
    }
    ops_.push_back(signedCount);
  }
  json ops_ = json::array();
};

// The member changes of one object element: {"m": replaced members, "x": removed keys}.
json mergeOp(const json& from, const json& to) {
  json m = json::object();
  json x = json::array();
  for (const auto& [key, value] : to.items()) {
    auto it = from.find(key);
    if (it == from.end() || *it != value) m[key] = value;
  }
  for (const auto& [key, value] : from.items()) {
    if (!to.contains(key)) x.push_back(key);
  }
  json op = {{"m", std::move(m)}};
  if (!x.empty()) op["x"] = std::move(x);
  return op;
}

// Greedy edit script: elements of `to` found at or after the cursor in `from` are copied (the
// old elements in between skipped); an element that replaces an old one that `to` no longer
// holds is a merge when that is shorter; anything else is inserted.
json diffArray(const json& from, const json& to) {
  std::vector<std::string> oldText;
  oldText.reserve(from.size());
  std::unordered_map<std::string, std::vector<std::size_t>> where;
  for (std::size_t i = 0; i < from.size(); ++i) {
    oldText.push_back(from[i].dump());
    where[oldText.back()].push_back(i);
  }
  std::unordered_set<std::string> kept;
  std::vector<std::string> newText;
  newText.reserve(to.size());
  for (const auto& e : to) {
    newText.push_back(e.dump());
    kept.insert(newText.back());
  }
  OpWriter ops;
  std::size_t cursor = 0;
  for (std::size_t i = 0; i < to.size(); ++i) {
    const auto found = where.find(newText[i]);
    if (found != where.end()) {
      const auto& at = found->second;
      const auto next = std::lower_bound(at.begin(), at.end(), cursor);
      if (next != at.end()) {
        if (*next > cursor) ops.skip(static_cast<std::int64_t>(*next - cursor));
        ops.copy(1);
        cursor = *next + 1;
        continue;
      }
    }
    if (cursor < from.size() && from[cursor].is_object() && to[i].is_object() &&
        !kept.contains(oldText[cursor])) {
      json op = mergeOp(from[cursor], to[i]);
      if (op.dump().size() < newText[i].size()) {
        ops.merge(std::move(op));
        ++cursor;
        continue;
      }
    }
    ops.insert(to[i]);
  }
  return ops.take();
}

// "a,b,c" as ["a","b","c"] ("" as []), and back: long lists in text (a status's shard sets)
// are edited token by token.
json splitTokens(const std::string& text) {
  json out = json::array();
  if (text.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos
                                                                 : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

StatusOr<std::string> joinTokens(const json& tokens) {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].is_string()) return invalidArgument("a token is not a string");
    if (i > 0) out += ',';
    out += tokens[i].get<std::string>();
  }
  return out;
}

// Text of at least this many bytes with commas in it is edited token by token when that is
// shorter than sending it.
constexpr std::size_t kMinTokenEdit = 64;

// The change that sets `to` at `path` (from `from`, a value of the same member).
json setOrEdit(const json& from, const json& to, const json& path) {
  if (from.is_array() && to.is_array() && !from.empty()) {
    json ops = diffArray(from, to);
    if (ops.dump().size() < to.dump().size()) return {{"p", path}, {"e", std::move(ops)}};
  } else if (from.is_string() && to.is_string()) {
    const auto& a = from.get_ref<const std::string&>();
    const auto& b = to.get_ref<const std::string&>();
    if (a.size() >= kMinTokenEdit && a.find(',') != std::string::npos) {
      json ops = diffArray(splitTokens(a), splitTokens(b));
      if (ops.dump().size() < to.dump().size()) return {{"p", path}, {"t", std::move(ops)}};
    }
  }
  return {{"p", path}, {"v", to}};
}

void diffObject(const json& from, const json& to, json& path, json& changes) {
  for (const auto& [key, value] : to.items()) {
    path.push_back(key);
    auto it = from.find(key);
    if (it == from.end()) {
      changes.push_back({{"p", path}, {"v", value}});
    } else if (*it != value) {
      if (it->is_object() && value.is_object()) {
        diffObject(*it, value, path, changes);
      } else {
        changes.push_back(setOrEdit(*it, value, path));
      }
    }
    path.erase(path.size() - 1);
  }
  for (const auto& [key, value] : from.items()) {
    if (to.contains(key)) continue;
    path.push_back(key);
    changes.push_back({{"p", path}, {"d", true}});
    path.erase(path.size() - 1);
  }
}

Status misfit(std::size_t index, const std::string& why) {
  return invalidArgument("delta change " + std::to_string(index) + ": " + why);
}

StatusOr<json> applyArrayEdit(const json& from, const json& ops, std::size_t index) {
  if (!ops.is_array()) return misfit(index, "\"e\" is not an array");
  json out = json::array();
  std::size_t cursor = 0;
  for (const auto& op : ops) {
    if (op.is_number_integer()) {
      const auto n = op.get<std::int64_t>();
      const auto count = static_cast<std::size_t>(n < 0 ? -n : n);
      if (n == 0 || count > from.size() - cursor) {
        return misfit(index, "copies or skips past the end of the array");
      }
      if (n > 0) {
        for (std::size_t k = 0; k < count; ++k) out.push_back(from[cursor + k]);
      }
      cursor += count;
    } else if (op.is_array()) {
      for (const auto& e : op) out.push_back(e);
    } else if (op.is_object() && op.contains("m") && op["m"].is_object()) {
      if (cursor >= from.size() || !from[cursor].is_object()) {
        return misfit(index, "merges into an element that is not an object");
      }
      json element = from[cursor++];
      for (const auto& [key, value] : op["m"].items()) element[key] = value;
      if (op.contains("x")) {
        if (!op["x"].is_array()) return misfit(index, "\"x\" is not an array");
        for (const auto& key : op["x"]) {
          if (!key.is_string()) return misfit(index, "a key in \"x\" is not a string");
          element.erase(key.get<std::string>());
        }
      }
      out.push_back(std::move(element));
    } else {
      return misfit(index, "an op is neither a count, an array nor a merge");
    }
  }
  return out;
}

}  // namespace

json diffJson(const json& from, const json& to) {
  json changes = json::array();
  json path = json::array();
  diffObject(from, to, path, changes);
  return changes;
}

StatusOr<json> applyJsonDelta(const json& from, const json& changes) {
  if (!from.is_object()) return invalidArgument("a delta applies to an object");
  if (!changes.is_array()) return invalidArgument("a delta is an array of changes");
  json out = from;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const json& c = changes[i];
    if (!c.is_object() || !c.contains("p") || !c["p"].is_array() || c["p"].empty()) {
      return misfit(i, "no path");
    }
    json* parent = &out;
    const json& path = c["p"];
    for (std::size_t k = 0; k + 1 < path.size(); ++k) {
      if (!path[k].is_string() || !parent->is_object()) return misfit(i, "the path does not fit");
      auto it = parent->find(path[k].get<std::string>());
      if (it == parent->end()) return misfit(i, "the path does not fit");
      parent = &*it;
    }
    if (!path.back().is_string() || !parent->is_object()) return misfit(i, "the path does not fit");
    const std::string key = path.back().get<std::string>();
    if (c.contains("v")) {
      (*parent)[key] = c["v"];
    } else if (c.contains("d")) {
      if (parent->erase(key) == 0) return misfit(i, "deletes a member that is not there");
    } else if (c.contains("e")) {
      auto it = parent->find(key);
      if (it == parent->end() || !it->is_array()) return misfit(i, "edits what is not an array");
      auto edited = applyArrayEdit(*it, c["e"], i);
      if (!edited.ok()) return edited.status();
      *it = std::move(*edited);
    } else if (c.contains("t")) {
      auto it = parent->find(key);
      if (it == parent->end() || !it->is_string()) return misfit(i, "edits what is not text");
      auto edited = applyArrayEdit(splitTokens(it->get<std::string>()), c["t"], i);
      if (!edited.ok()) return edited.status();
      auto text = joinTokens(*edited);
      if (!text.ok()) return misfit(i, text.status().message());
      *it = std::move(*text);
    } else {
      return misfit(i, "neither \"v\", \"d\", \"e\" nor \"t\"");
    }
  }
  return out;
}

std::string textDigest(std::string_view text) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = kHex[h & 0xf];
    h >>= 4;
  }
  return out;
}

}  // namespace kshard::sharding
