#include "sharding/shard_map_json.h"

#include <cmath>
#include <utility>

#include "sharding/json_field_reader.h"

namespace kshard::sharding {
namespace {

using nlohmann::json;

// A spec duration: absent keeps the default; present must be a valid duration string.
Duration readDuration(JsonFieldReader& r, std::string_view key, Duration fallback) {
  if (!r.ok() || !r.has(key)) return fallback;
  const std::string text = r.requiredString(key);
  if (!r.ok()) return fallback;
  StatusOr<Duration> d = parseDuration(text);
  if (!d.ok()) {
    r.fail(key, d.status().message() + " (write it like \"20s\", \"1m30s\" or \"500ms\")");
    return fallback;
  }
  return *d;
}

ShardSet readShardSet(JsonFieldReader& r, std::string_view key, std::int32_t shardCount,
                      bool required) {
  const std::string text = required ? r.requiredString(key) : r.optionalString(key, "");
  if (!r.ok()) return {};
  StatusOr<ShardSet> set = ShardSet::parse(text, shardCount);
  if (!set.ok()) {
    r.fail(key, set.status().message());
    return {};
  }
  return *std::move(set);
}

// Decodes every element of an optional array field with `decode(element, path)`.
template <typename T, typename Decode>
std::vector<T> readArray(JsonFieldReader& r, std::string_view key, Decode decode, Status& error) {
  std::vector<T> out;
  const json* array = r.optionalArray(key);
  if (array == nullptr) return out;
  out.reserve(array->size());
  for (std::size_t i = 0; i < array->size() && error.ok(); ++i) {
    JsonFieldReader element((*array)[i], JsonFieldReader::elementPath(r.pathOf(key), i));
    T value = decode(element);
    if (!element.ok()) error = element.status();
    out.push_back(std::move(value));
  }
  return out;
}

// An optional array of strings; empty when absent.
std::vector<std::string> readStrings(JsonFieldReader& r, std::string_view key) {
  std::vector<std::string> out;
  const json* array = r.optionalArray(key);
  if (array == nullptr) return out;
  for (std::size_t i = 0; i < array->size() && r.ok(); ++i) {
    if (!(*array)[i].is_string()) {
      r.fail(key, "item " + std::to_string(i) + " is not a string");
    } else {
      out.push_back((*array)[i].get<std::string>());
    }
  }
  return out;
}

// A measured load: a finite number >= 0.
double readLoad(JsonFieldReader& r, std::string_view key) {
  const double load = r.optionalNumber(key, 0);
  if (r.ok() && !(load >= 0 && std::isfinite(load))) r.fail(key, "must be a finite number >= 0");
  return load;
}

LoadStatus readLoadStatus(JsonFieldReader& r, std::int32_t shardCount, Status& error) {
  LoadStatus load;
  load.peakToMean = readLoad(r, "peakToMean");
  load.bound = readLoad(r, "bound");
  load.total = readLoad(r, "total");
  load.hottest = readArray<ShardLoadReport>(
      r, "hottest",
      [shardCount](JsonFieldReader& h) {
        ShardLoadReport out;
        out.shard = static_cast<ShardId>(h.requiredInt("shard", 1, shardCount));
        out.pod = h.optionalString("pod", "");
        out.load = readLoad(h, "load");
        return out;
      },
      error);
  return load;
}

RegisteredPod readPod(JsonFieldReader& r) {
  RegisteredPod pod;
  pod.name = r.requiredString("name");
  pod.uid = r.optionalString("uid", "");
  pod.address = r.optionalString("address", "");
  pod.version = r.optionalString("version", "");
  pod.incarnation = r.optionalString("incarnation", "");
  pod.shards = static_cast<std::int32_t>(r.optionalInt("shards", 0, 0, kMaxShardCount));
  if (r.has("load")) pod.load = readLoad(r, "load");
  return pod;
}

Condition readCondition(JsonFieldReader& r) {
  Condition c;
  c.type = r.requiredString("type");
  c.status = r.requiredString("status");
  if (r.ok() && c.status != "True" && c.status != "False" && c.status != "Unknown") {
    r.fail("status", "must be \"True\", \"False\" or \"Unknown\"");
  }
  c.observedGeneration = r.optionalInt("observedGeneration", 0, 0, INT64_MAX);
  c.lastTransitionTime = r.optionalString("lastTransitionTime", "");
  c.reason = r.optionalString("reason", "");
  c.message = r.optionalString("message", "");
  return c;
}

ObjectMeta readMetadata(JsonFieldReader& r) {
  ObjectMeta m;
  m.name = r.optionalString("name", "");
  m.namespace_ = r.optionalString("namespace", "");
  m.uid = r.optionalString("uid", "");
  m.resourceVersion = r.optionalString("resourceVersion", "");
  m.generation = r.optionalInt("generation", 0, 0, INT64_MAX);
  m.creationTimestamp = r.optionalString("creationTimestamp", "");
  return m;
}

StatusOr<ShardMapSpec> readSpec(JsonFieldReader& r) {
  ShardMapSpec spec;
  spec.shards = static_cast<std::int32_t>(r.requiredInt("shards", kMinShardCount, kMaxShardCount));
  spec.versionLabel = r.optionalString("versionLabel", spec.versionLabel);
  spec.rebalanceInterval = readDuration(r, "rebalanceInterval", spec.rebalanceInterval);
  spec.rebalanceRetryInterval =
      readDuration(r, "rebalanceRetryInterval", spec.rebalanceRetryInterval);
  spec.rebalanceRate = r.optionalNumber("rebalanceRate", spec.rebalanceRate);
  spec.pingTimeout = readDuration(r, "pingTimeout", spec.pingTimeout);
  spec.handoffTimeout = readDuration(r, "handoffTimeout", spec.handoffTimeout);
  spec.entityIdleTimeout = readDuration(r, "entityIdleTimeout", spec.entityIdleTimeout);
  spec.maxActiveEntitiesPerPod = static_cast<std::int32_t>(
      r.optionalInt("maxActiveEntitiesPerPod", spec.maxActiveEntitiesPerPod, 0, INT32_MAX));
  spec.sendTimeout = readDuration(r, "sendTimeout", spec.sendTimeout);
  spec.ownershipLease = readDuration(r, "ownershipLease", spec.ownershipLease);
  const std::string balance = r.optionalString("balance", "count");
  if (auto b = parseBalance(balance)) {
    spec.balance = *b;
  } else if (r.ok()) {
    r.fail("balance", "must be \"count\" or \"load\"");
  }
  spec.loadTolerance = r.optionalNumber("loadTolerance", spec.loadTolerance);
  spec.handoffFailureLimit = static_cast<std::int32_t>(
      r.optionalInt("handoffFailureLimit", spec.handoffFailureLimit, 0, kMaxHandoffFailureLimit));
  spec.handoffBackoff = readDuration(r, "handoffBackoff", spec.handoffBackoff);
  spec.rememberedEntityTypes = readStrings(r, "rememberedEntityTypes");
  spec.singletons = readStrings(r, "singletons");
  if (!r.ok()) return r.status();
  if (Status s = validateSpec(spec); !s.ok()) return s;
  return spec;
}

StatusOr<ShardMapStatus> readStatus(JsonFieldReader& r, std::int32_t shardCount) {
  ShardMapStatus status;
  Status error;
  status.observedGeneration = r.optionalInt("observedGeneration", 0, 0, INT64_MAX);
  status.epoch = r.optionalInt("epoch", 0, 0, INT64_MAX);
  if (const json* manager = r.optionalObject("manager")) {
    JsonFieldReader m(*manager, r.pathOf("manager"));
    ManagerRef ref{m.requiredString("pod"), m.optionalString("address", "")};
    if (!m.ok()) return m.status();
    status.manager = std::move(ref);
  }
  status.pods = readArray<RegisteredPod>(r, "pods", readPod, error);
  status.assignments = readArray<Assignment>(
      r, "assignments",
      [shardCount](JsonFieldReader& a) {
        Assignment out;
        out.pod = a.requiredString("pod");
        out.epoch = a.requiredInt("epoch", 0, INT64_MAX);
        out.shards = readShardSet(a, "shards", shardCount, true);
        return out;
      },
      error);
  status.unassigned = readShardSet(r, "unassigned", shardCount, false);
  status.podCount = static_cast<std::int32_t>(r.optionalInt("podCount", 0, 0, INT32_MAX));
  status.unassignedCount =
      static_cast<std::int32_t>(r.optionalInt("unassignedCount", 0, 0, kMaxShardCount));
  status.conditions = readArray<Condition>(r, "conditions", readCondition, error);
  if (const json* load = r.optionalObject("load"); load != nullptr && error.ok()) {
    JsonFieldReader l(*load, r.pathOf("load"));
    status.load = readLoadStatus(l, shardCount, error);
    if (!l.ok()) return l.status();
  }
  if (!r.ok()) return r.status();
  if (!error.ok()) return error;
  return status;
}

}  // namespace

json toJson(const ShardMapSpec& spec) {
  json out{
      {"shards", spec.shards},
      {"versionLabel", spec.versionLabel},
      {"rebalanceInterval", formatDuration(spec.rebalanceInterval)},
      {"rebalanceRetryInterval", formatDuration(spec.rebalanceRetryInterval)},
      {"rebalanceRate", spec.rebalanceRate},
      {"pingTimeout", formatDuration(spec.pingTimeout)},
      {"handoffTimeout", formatDuration(spec.handoffTimeout)},
      {"entityIdleTimeout", formatDuration(spec.entityIdleTimeout)},
      {"maxActiveEntitiesPerPod", spec.maxActiveEntitiesPerPod},
      {"sendTimeout", formatDuration(spec.sendTimeout)},
      {"ownershipLease", formatDuration(spec.ownershipLease)},
      {"balance", balanceName(spec.balance)},
      {"loadTolerance", spec.loadTolerance},
      {"handoffFailureLimit", spec.handoffFailureLimit},
      {"handoffBackoff", formatDuration(spec.handoffBackoff)},
  };
  // Only when set: a map that remembers nothing reads as it did before the field.
  if (!spec.rememberedEntityTypes.empty())
    out["rememberedEntityTypes"] = spec.rememberedEntityTypes;
  // Written only when set, so that a map without singletons reads as before.
  if (!spec.singletons.empty()) out["singletons"] = spec.singletons;
  return out;
}

json toJson(const ShardMapStatus& status) {
  json out{
      {"observedGeneration", status.observedGeneration},
      {"epoch", status.epoch},
      {"pods", json::array()},
      {"assignments", json::array()},
      {"unassigned", status.unassigned.toString()},
      {"podCount", status.podCount},
      {"unassignedCount", status.unassignedCount},
      {"conditions", json::array()},
  };
  if (status.manager) {
    out["manager"] = {{"pod", status.manager->pod}, {"address", status.manager->address}};
  }
  for (const RegisteredPod& p : status.pods) {
    json& pod = out["pods"].emplace_back(json{{"name", p.name},
                                              {"uid", p.uid},
                                              {"address", p.address},
                                              {"version", p.version},
                                              {"incarnation", p.incarnation},
                                              {"shards", p.shards}});
    if (p.load) pod["load"] = *p.load;
  }
  for (const Assignment& a : status.assignments) {
    out["assignments"].push_back(
        {{"pod", a.pod}, {"epoch", a.epoch}, {"shards", a.shards.toString()}});
  }
  for (const Condition& c : status.conditions) {
    out["conditions"].push_back({{"type", c.type},
                                 {"status", c.status},
                                 {"observedGeneration", c.observedGeneration},
                                 {"lastTransitionTime", c.lastTransitionTime},
                                 {"reason", c.reason},
                                 {"message", c.message}});
  }
  if (status.load) {
    json hottest = json::array();
    for (const ShardLoadReport& h : status.load->hottest) {
      hottest.push_back({{"shard", h.shard}, {"pod", h.pod}, {"load", h.load}});
    }
    out["load"] = {{"peakToMean", status.load->peakToMean},
                   {"bound", status.load->bound},
                   {"total", status.load->total},
                   {"hottest", std::move(hottest)}};
  }
  return out;
}

json toJson(const ShardMap& shardMap) {
  json metadata = json::object();
  const ObjectMeta& m = shardMap.metadata;
  for (auto [key, value] :
       {std::pair{"name", &m.name}, std::pair{"namespace", &m.namespace_}, std::pair{"uid", &m.uid},
        std::pair{"resourceVersion", &m.resourceVersion},
        std::pair{"creationTimestamp", &m.creationTimestamp}}) {
    if (!value->empty()) metadata[key] = *value;
  }
  if (m.generation != 0) metadata["generation"] = m.generation;
  return json{{"apiVersion", kShardMapApiVersion},
              {"kind", kShardMapKind},
              {"metadata", std::move(metadata)},
              {"spec", toJson(shardMap.spec)},
              {"status", toJson(shardMap.status)}};
}

StatusOr<ShardMapSpec> specFromJson(const json& in) {
  JsonFieldReader r(in, "spec");
  return readSpec(r);
}

StatusOr<ShardMapStatus> statusFromJson(const json& in, std::int32_t shardCount) {
  JsonFieldReader r(in, "status");
  return readStatus(r, shardCount);
}

StatusOr<ShardMap> shardMapFromJson(const json& in) {
  JsonFieldReader root(in, "");
  const std::string apiVersion = root.optionalString("apiVersion", kShardMapApiVersion);
  const std::string kind = root.optionalString("kind", kShardMapKind);
  if (root.ok() && apiVersion != kShardMapApiVersion) {
    root.fail("apiVersion", std::string("must be \"") + kShardMapApiVersion + "\"");
  }
  if (root.ok() && kind != kShardMapKind) {
    root.fail("kind", std::string("must be \"") + kShardMapKind + "\"");
  }
  ShardMap out;
  if (const json* metadata = root.optionalObject("metadata")) {
    JsonFieldReader m(*metadata, "metadata");
    out.metadata = readMetadata(m);
    if (!m.ok()) return m.status();
  }
  if (!root.ok()) return root.status();
  if (!root.has("spec")) return invalidArgument("spec: is required");
  StatusOr<ShardMapSpec> spec = specFromJson(in["spec"]);
  if (!spec.ok()) return spec.status();
  out.spec = *spec;
  if (root.has("status")) {
    const json& stored = in["status"];
    if (stored.is_object() && stored.contains("segments") && !stored["segments"].is_null()) {
      return failedPrecondition(
          "status.segments: the status is stored in ShardMapSegment objects; read them first "
          "(sharding/shard_map_segments.h)");
    }
    StatusOr<ShardMapStatus> status = statusFromJson(in["status"], out.spec.shards);
    if (!status.ok()) return status.status();
    out.status = *std::move(status);
  }
  return out;
}

StatusOr<ShardMap> parseShardMap(std::string_view text) {
  StatusOr<json> parsed = parseJson(text);
  if (!parsed.ok()) return parsed.status();
  return shardMapFromJson(*parsed);
}

}  // namespace kshard::sharding
