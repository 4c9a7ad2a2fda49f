#include "sharding/shard_map_segments.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

#include "base/sha256.h"
#include "sharding/json_field_reader.h"

namespace kshard::sharding {
namespace {

using nlohmann::json;

// The status members that move into segments, in the order they are laid out.
constexpr const char* kArrays[] = {"pods", "assignments"};
constexpr char kUnassigned[] = "unassigned";
// Names: the map's name (at most this long) and "-s" and this many hex digits of the address.
constexpr std::size_t kNamePrefix = 200;
constexpr std::size_t kNameDigits = 24;

// One element of the bulk, already serialised: a pod, an assignment, or a part of the unassigned
// shard set (which is cut at commas when it is long).
struct Item {
  const char* member;
  std::string text;
};

std::vector<Item> bulkItems(json& status, std::size_t segmentBytes) {
  std::vector<Item> items;
  for (const char* member : kArrays) {
    auto it = status.find(member);
    if (it == status.end()) continue;
    if (it->is_array()) {
      for (const json& element : *it) items.push_back({member, element.dump()});
    }
    status.erase(it);
  }
  auto it = status.find(kUnassigned);
  if (it != status.end()) {
    const std::string text = it->is_string() ? it->get<std::string>() : std::string();
    status.erase(it);
    // Parts of at most a quarter segment, cut after a comma.
    const std::size_t part = std::max<std::size_t>(segmentBytes / 4, 1);
    for (std::size_t at = 0; at < text.size();) {
      std::size_t end = std::min(text.size(), at + part);
      if (end < text.size()) {
        const std::size_t comma = text.rfind(',', end);
        if (comma != std::string::npos && comma > at) end = comma;
      }
      items.push_back({kUnassigned, text.substr(at, end - at)});
      at = end < text.size() && text[end] == ',' ? end + 1 : end;
    }
  }
  return items;
}

// The JSON text of one segment from its items (in layout order), joined as they were
// serialised to measure them: {"pods":[...],"assignments":[...],"unassigned":"..."}.
std::string segmentText(const std::vector<Item>& items, std::size_t from, std::size_t to) {
  std::string out = "{";
  const auto key = [&out](std::string_view name) {
    out += out.size() > 1 ? ",\"" : "\"";
    out += name;
    out += "\":";
  };
  for (const char* member : kArrays) {
    bool first = true;
    for (std::size_t i = from; i < to; ++i) {
      if (std::string_view(items[i].member) != member) continue;
      if (first) {
        key(member);
        out += '[';
      } else {
        out += ',';
      }
      out += items[i].text;
      first = false;
    }
    if (!first) out += ']';
  }
  std::string unassigned;
  for (std::size_t i = from; i < to; ++i) {
    if (std::string_view(items[i].member) != kUnassigned) continue;
    if (!unassigned.empty()) unassigned += ',';
    unassigned += items[i].text;
  }
  if (!unassigned.empty()) {
    key(kUnassigned);
    out += json(unassigned).dump();
  }
  return out + "}";
}

std::string segmentName(const json& object, std::size_t index, const std::string& data) {
  const json& meta = object.value("metadata", json::object());
  std::string name = meta.value("name", "");
  if (name.size() > kNamePrefix) name.resize(kNamePrefix);
  const std::string address = sha256Hex(meta.value("uid", "") + "/" +
                                        meta.value("resourceVersion", "") + "/" +
                                        std::to_string(index) + "/" + data);
  return name + "-s" + address.substr(0, kNameDigits);
}

}  // namespace

StatusOr<SplitStatus> splitStatus(json object, const SegmentLimits& limits,
                                  const std::vector<SegmentRef>& reuse) {
  SplitStatus out;
  auto status = object.find("status");
  if (status == object.end() || !status->is_object()) {
    out.object = std::move(object);
    return out;
  }
  status->erase("segments");
  if (status->dump().size() <= limits.inlineBytes) {
    out.object = std::move(object);
    return out;
  }
  const std::vector<Item> items = bulkItems(*status, limits.segmentBytes);
  json refs = json::array();
  for (std::size_t from = 0; from < items.size();) {
    std::size_t to = from;
    std::size_t bytes = 0;
    while (to < items.size() && (to == from || bytes + items[to].text.size() + 1 <=
                                                       limits.segmentBytes - 64)) {
      bytes += items[to].text.size() + 1;
      ++to;
    }
    if (items[from].text.size() + 64 > limits.segmentBytes) {
      return invalidArgument(std::string("status.") + items[from].member + ": one element of " +
                             std::to_string(items[from].text.size()) +
                             " bytes does not fit a segment of " +
                             std::to_string(limits.segmentBytes));
    }
    Segment segment;
    segment.data = segmentText(items, from, to);
    segment.ref.sha256 = sha256Hex(segment.data);
    const auto kept = std::find_if(reuse.begin(), reuse.end(), [&](const SegmentRef& r) {
      return r.sha256 == segment.ref.sha256;
    });
    segment.ref.name = kept != reuse.end() ? kept->name
                                           : segmentName(object, out.segments.size(), segment.data);
    refs.push_back({{"name", segment.ref.name}, {"sha256", segment.ref.sha256}});
    out.segments.push_back(std::move(segment));
    from = to;
  }
  (*status)["segments"] = std::move(refs);
  const std::int64_t shards = object.value("spec", json::object()).value("shards", 0);
  (*status)["pods"] = json::array();
  (*status)["assignments"] = json::array(
      {{{"pod", kSegmentedPod},
        {"epoch", status->value("epoch", 0)},
        {"shards", shards > 1 ? "1-" + std::to_string(shards) : std::string("1")}}});
  out.object = std::move(object);
  return out;
}

StatusOr<std::vector<SegmentRef>> segmentRefs(const json& object) {
  std::vector<SegmentRef> out;
  const auto status = object.find("status");
  if (status == object.end() || !status->is_object()) return out;
  const auto segments = status->find("segments");
  if (segments == status->end() || segments->is_null()) return out;
  if (!segments->is_array()) return invalidArgument("status.segments: must be an array");
  for (std::size_t i = 0; i < segments->size(); ++i) {
    JsonFieldReader r((*segments)[i], JsonFieldReader::elementPath("status.segments", i));
    SegmentRef ref{r.requiredString("name"), r.requiredString("sha256")};
    if (!r.ok()) return r.status();
    out.push_back(std::move(ref));
  }
  return out;
}

StatusOr<json> assembleStatus(json stub, const std::vector<std::string>& data) {
  StatusOr<std::vector<SegmentRef>> refs = segmentRefs(stub);
  if (!refs.ok()) return refs.status();
  if (refs->empty() && data.empty()) return stub;
  if (refs->size() != data.size()) {
    return invalidArgument("status.segments: names " + std::to_string(refs->size()) +
                           " segments, " + std::to_string(data.size()) + " given");
  }
  json& status = stub["status"];
  json pods = json::array();
  json assignments = json::array();
  std::string unassigned;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const SegmentRef& ref = (*refs)[i];
    if (sha256Hex(data[i]) != ref.sha256) {
      return failedPrecondition("ShardMapSegment " + ref.name + " does not match its digest");
    }
    json parsed = json::parse(data[i], nullptr, false);
    if (!parsed.is_object()) return invalidArgument("ShardMapSegment " + ref.name + ": not JSON");
    for (auto& [member, target] : {std::pair<const char*, json*>{"pods", &pods},
                                   std::pair<const char*, json*>{"assignments", &assignments}}) {
      auto it = parsed.find(member);
      if (it == parsed.end()) continue;
      if (!it->is_array()) {
        return invalidArgument("ShardMapSegment " + ref.name + ": " + member + " not an array");
      }
      for (json& element : *it) target->push_back(std::move(element));
    }
    if (auto it = parsed.find(kUnassigned); it != parsed.end()) {
      if (!it->is_string()) {
        return invalidArgument("ShardMapSegment " + ref.name + ": unassigned not a string");
      }
      if (!unassigned.empty()) unassigned += ',';
      unassigned += it->get<std::string>();
    }
  }
  status.erase("segments");
  status["pods"] = std::move(pods);
  status["assignments"] = std::move(assignments);
  status[kUnassigned] = std::move(unassigned);
  return stub;
}

json segmentObject(const json& map, const Segment& segment) {
  const json& meta = map.value("metadata", json::object());
  const std::string name = meta.value("name", "");
  json owner = {{"apiVersion", kShardMapApiVersion},
                {"kind", kShardMapKind},
                {"name", name},
                {"uid", meta.value("uid", "")}};
  return {{"apiVersion", kShardMapApiVersion},
          {"kind", kSegmentKind},
          {"metadata",
           {{"name", segment.ref.name},
            {"namespace", meta.value("namespace", "")},
            {"labels", {{kShardMapLabel, name}}},
            {"ownerReferences", json::array({owner})}}},
          {"data", segment.data}};
}

StatusOr<std::string> segmentData(const json& segmentObject) {
  const auto data = segmentObject.find("data");
  if (!segmentObject.is_object() || data == segmentObject.end() || !data->is_string()) {
    return invalidArgument("ShardMapSegment: data: is required");
  }
  return data->get<std::string>();
}

void completeShardMap(json object, const SegmentFetch& fetch,
                      std::function<void(StatusOr<json>)> done) {
  StatusOr<std::vector<SegmentRef>> refs = segmentRefs(object);
  if (!refs.ok()) return done(refs.status());
  if (refs->empty()) return done(std::move(object));
  struct Gather {
    std::mutex mu;
    json object;
    std::vector<std::string> data;
    std::size_t left;
    std::optional<Status> error;
    std::function<void(StatusOr<json>)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->object = std::move(object);
  gather->data.resize(refs->size());
  gather->left = refs->size();
  gather->done = std::move(done);
  for (std::size_t i = 0; i < refs->size(); ++i) {
    fetch((*refs)[i].name, [gather, i](StatusOr<std::string> data) {
      std::unique_lock lock(gather->mu);
      if (data.ok()) {
        gather->data[i] = std::move(*data);
      } else if (!gather->error) {
        gather->error = data.status();
      }
      if (--gather->left > 0) return;
      lock.unlock();
      if (gather->error) return gather->done(*gather->error);
      gather->done(assembleStatus(std::move(gather->object), gather->data));
    });
  }
}

bool isSegmentedHead(const ShardMapStatus& status) {
  // O(1): asked on every renewal. A head has no pods and the one assignment splitStatus wrote.
  return status.pods.empty() && status.assignments.size() == 1 &&
         status.assignments.front().pod == kSegmentedPod;
}

json withoutSegments(json object) {
  if (auto status = object.find("status"); status != object.end() && status->is_object()) {
    status->erase("segments");
  }
  return object;
}

}  // namespace kshard::sharding
