#include "protocol/wire.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "base/utf8.h"

namespace kshard::protocol {
namespace {

using nlohmann::json;

// Parses a request body as a JSON object. nlohmann reports malformed input by exception; it is
// turned into a Status here, at the edge.
StatusOr<json> parseObject(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalidArgument("body is not valid JSON");
  if (!j.is_object()) return invalidArgument("body must be a JSON object");
  return j;
}

// A required string field of at most `maxLen` bytes of valid UTF-8.
Status readString(const json& j, const char* field, std::size_t maxLen, bool required,
                  std::string& out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) return invalidArgument(std::string(field) + ": required");
    return {};
  }
  if (!it->is_string()) return invalidArgument(std::string(field) + ": must be a string");
  const auto& s = it->get_ref<const std::string&>();
  if (required && s.empty()) return invalidArgument(std::string(field) + ": must not be empty");
  if (s.size() > maxLen) {
    return invalidArgument(std::string(field) + ": longer than " + std::to_string(maxLen) +
                           " bytes");
  }
  if (Status u = validateUtf8(s); !u.ok()) return u.withContext(field);
  out = s;
  return {};
}

Status readEpoch(const json& j, const char* field, Epoch& out) {
  auto it = j.find(field);
  if (it == j.end()) return invalidArgument(std::string(field) + ": required");
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0)) {
    return invalidArgument(std::string(field) + ": must be a non-negative integer");
  }
  out = it->get<Epoch>();
  return {};
}

// An optional non-negative integer field (0 when absent).
Status readCount(const json& j, const char* field, std::int64_t& out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0) {
    return invalidArgument(std::string(field) + ": must be a non-negative integer");
  }
  out = it->get<std::int64_t>();
  return {};
}

Status readShards(const json& j, const char* field, std::int32_t shardCount,
                  sharding::ShardSet& out) {
  // Required, but may be "" (no shard): null is not a range text.
  if (auto it = j.find(field); it == j.end() || it->is_null()) {
    return invalidArgument(std::string(field) + ": required");
  }
  std::string text;
  if (Status s = readString(j, field, 1u << 20, false, text); !s.ok()) return s;
  auto set = sharding::ShardSet::parse(text, shardCount);
  if (!set.ok()) return set.status().withContext(field);
  out = std::move(*set);
  return {};
}

constexpr std::size_t kMaxNameLen = 253;
constexpr std::size_t kMaxUidLen = 128;
constexpr std::size_t kMaxAddressLen = 261;  // host name (253) + ':' + port
constexpr std::size_t kMaxVersionLen = 63;   // a label value
constexpr std::size_t kMaxIncarnationLen = 64;

// Uids and incarnations are ids: letters, digits and '-' (so they need no escaping anywhere).
bool isIdText(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

Status readTarget(const json& j, Target& out) {
  for (Status s : {readString(j, "pod", kMaxNameLen, true, out.pod),
                   readString(j, "uid", kMaxUidLen, true, out.uid),
                   readString(j, "incarnation", kMaxIncarnationLen, true, out.incarnation)}) {
    if (!s.ok()) return s;
  }
  if (!isDnsSubdomain(out.pod)) return invalidArgument("pod: not a valid pod name");
  if (!isIdText(out.uid)) return invalidArgument("uid: only letters, digits and '-'");
  if (!isIdText(out.incarnation)) {
    return invalidArgument("incarnation: only letters, digits and '-'");
  }
  return {};
}

Status validateAddress(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return invalidArgument("address: must be host:port");
  }
  const std::string port = address.substr(colon + 1);
  // Canonical decimal only (no sign, no leading zero), so that one address has one spelling.
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      port[0] == '0' || std::stoi(port) > 65535) {
    return invalidArgument("address: port must be 1..65535 (decimal, no leading zero)");
  }
  return {};
}

// `fields` and a pod's identity (as the register, ping and peer calls carry it), encoded.
std::string encodeWithIdentity(const std::string& pod, const std::string& uid,
                               const std::string& incarnation, json fields = json::object()) {
  fields["pod"] = pod;
  fields["uid"] = uid;
  fields["incarnation"] = incarnation;
  return fields.dump();
}

}  // namespace

std::string encode(const RegisterRequest& r) {
  return encodeWithIdentity(r.pod, r.uid, r.incarnation,
                            {{"address", r.address}, {"version", r.version}});
}
std::string encode(const EpochResponse& r) {
  json j{{"epoch", r.epoch}};
  if (r.terminating) j["terminating"] = *r.terminating;
  return j.dump();
}
std::string encode(const UnregisterRequest& r) {
  return json{{"pod", r.pod}, {"uid", r.uid}}.dump();
}
std::string encode(const UnregisterDeferred& r) {
  return json{{"error", {{"code", errors::kUnregisterDeferred}, {"message", r.message}}},
              {"retryAfterMs", r.retryAfterMs},
              {"deferredForMs", r.deferredForMs},
              {"waitingFor", {{"version", r.version}, {"pods", r.startingPods}}}}
      .dump();
}
std::string encode(const NotifyUnhealthyRequest& r) { return json{{"pod", r.pod}}.dump(); }
std::string encode(const PingResponse& r) {
  json fields{{"epoch", r.epoch}, {"shards", r.shards}};
  if (r.load) {
    json load = json::array();
    for (const auto& [shard, value] : *r.load) load.push_back(json::array({shard, value}));
    fields["load"] = std::move(load);
  }
  return encodeWithIdentity(r.pod, r.uid, r.incarnation, std::move(fields));
}
std::string encode(const ShardsRequest& r) {
  return encodeWithIdentity(
      r.target.pod, r.target.uid, r.target.incarnation,
      {{"shardMap", r.shardMap}, {"epoch", r.epoch}, {"shards", r.shards.toString()}});
}
std::string encode(const Target& r) { return encodeWithIdentity(r.pod, r.uid, r.incarnation); }
std::string encode(const AssignResponse& r) {
  return json{{"refused", r.refused.toString()}}.dump();
}

StatusOr<RegisterRequest> decodeRegisterRequest(std::string_view body) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  RegisterRequest r;
  for (Status s : {readString(*j, "pod", kMaxNameLen, true, r.pod),
                   readString(*j, "uid", kMaxUidLen, true, r.uid),
                   readString(*j, "address", kMaxAddressLen, true, r.address),
                   readString(*j, "version", kMaxVersionLen, false, r.version),
                   readString(*j, "incarnation", kMaxIncarnationLen, false, r.incarnation)}) {
    if (!s.ok()) return s;
  }
  if (Status s = validateAddress(r.address); !s.ok()) return s;
  if (!isIdText(r.incarnation)) return invalidArgument("incarnation: only letters, digits and '-'");
  return r;
}

StatusOr<EpochResponse> decodeEpochResponse(std::string_view body) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  EpochResponse r;
  if (Status s = readEpoch(*j, "epoch", r.epoch); !s.ok()) return s;
  if (auto t = j->find("terminating"); t != j->end() && !t->is_null()) {
    if (!t->is_boolean()) return invalidArgument("terminating: must be a boolean");
    r.terminating = t->get<bool>();
  }
  return r;
}

StatusOr<UnregisterRequest> decodeUnregisterRequest(std::string_view body) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  UnregisterRequest r;
  for (Status s : {readString(*j, "pod", kMaxNameLen, true, r.pod),
                   readString(*j, "uid", kMaxUidLen, true, r.uid)}) {
    if (!s.ok()) return s;
  }
  return r;
}

StatusOr<UnregisterDeferred> decodeUnregisterDeferred(std::string_view body) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  const auto error = j->find("error");
  if (error == j->end() || !error->is_object() ||
      error->value("code", json()) != json(errors::kUnregisterDeferred)) {
    return invalidArgument("error.code: must be " + std::string(errors::kUnregisterDeferred));
  }
  UnregisterDeferred r;
  if (Status s = readString(*error, "message", 4096, false, r.message); !s.ok()) {
    return s.withContext("error");
  }
  for (Status s : {readCount(*j, "retryAfterMs", r.retryAfterMs),
                   readCount(*j, "deferredForMs", r.deferredForMs)}) {
    if (!s.ok()) return s;
  }
  if (auto waiting = j->find("waitingFor"); waiting != j->end() && !waiting->is_null()) {
    if (!waiting->is_object()) return invalidArgument("waitingFor: must be an object");
    for (Status s : {readString(*waiting, "version", kMaxVersionLen, false, r.version),
                     readCount(*waiting, "pods", r.startingPods)}) {
      if (!s.ok()) return s.withContext("waitingFor");
    }
  }
  return r;
}

StatusOr<NotifyUnhealthyRequest> decodeNotifyUnhealthyRequest(std::string_view body) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  NotifyUnhealthyRequest r;
  if (Status s = readString(*j, "pod", kMaxNameLen, true, r.pod); !s.ok()) return s;
  return r;
}

StatusOr<Target> decodeTarget(std::string_view body) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  Target t;
  if (Status s = readTarget(*j, t); !s.ok()) return s;
  return t;
}

namespace {

// [[shard, load], ...], optional: shard ids >= 1 (the caller bounds them by its count), loads
// finite and >= 0; a load above kMaxShardLoad is taken as that.
Status readShardLoads(const json& j, const char* field,
                      std::optional<std::vector<std::pair<sharding::ShardId, double>>>& result) {
  const auto it = j.find(field);
  if (it == j.end()) return {};
  auto& out = result.emplace();
  const auto bad = [field] {
    return invalidArgument(std::string(field) + ": must be an array of [shard, load] pairs");
  };
  if (!it->is_array()) return bad();
  out.reserve(it->size());
  for (const json& pair : *it) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() ||
        !pair[1].is_number()) {
      return bad();
    }
    const auto shard = pair[0].get<std::int64_t>();
    const auto load = pair[1].get<double>();
    if (shard < 1 || shard > sharding::kMaxShardCount || !(load >= 0 && std::isfinite(load))) {
      return bad();
    }
    out.emplace_back(static_cast<sharding::ShardId>(shard), std::min(load, kMaxShardLoad));
  }
  return {};
}

}  // namespace

StatusOr<PingResponse> decodePingResponse(std::string_view body) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  PingResponse r;
  for (Status s :
       {readString(*j, "pod", kMaxNameLen, true, r.pod),
        readString(*j, "uid", kMaxUidLen, false, r.uid),
        readString(*j, "incarnation", kMaxIncarnationLen, false, r.incarnation),
        readEpoch(*j, "epoch", r.epoch), readString(*j, "shards", 1u << 20, false, r.shards),
        readShardLoads(*j, "load", r.load)}) {
    if (!s.ok()) return s;
  }
  return r;
}

StatusOr<ShardsRequest> decodeShardsRequest(std::string_view body, std::int32_t shardCount) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  ShardsRequest r;
  for (Status s :
       {readString(*j, "shardMap", 2 * kMaxNameLen + 1, true, r.shardMap), readTarget(*j, r.target),
        readEpoch(*j, "epoch", r.epoch), readShards(*j, "shards", shardCount, r.shards)}) {
    if (!s.ok()) return s;
  }
  if (auto ref = parseShardMapRef(r.shardMap); !ref.ok()) return ref.status();
  return r;
}

StatusOr<AssignResponse> decodeAssignResponse(std::string_view body, std::int32_t shardCount) {
  auto j = parseObject(body);
  if (!j.ok()) return j.status();
  AssignResponse r;
  if (Status s = readShards(*j, "refused", shardCount, r.refused); !s.ok()) return s;
  return r;
}

std::string pingQuery(const Target& target) {
  // Valid targets need no escaping (readTarget): names, uids and incarnations are URL-safe.
  return "pod=" + target.pod + "&uid=" + target.uid + "&incarnation=" + target.incarnation;
}

StatusOr<Target> targetFromQuery(std::optional<std::string_view> pod,
                                 std::optional<std::string_view> uid,
                                 std::optional<std::string_view> incarnation) {
  json j = json::object();
  if (pod) j["pod"] = std::string(*pod);
  if (uid) j["uid"] = std::string(*uid);
  if (incarnation) j["incarnation"] = std::string(*incarnation);
  Target t;
  if (Status s = readTarget(j, t); !s.ok()) return s.withContext("query");
  return t;
}

bool isDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

bool isDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = s.find('.', start);
    if (!isDnsLabel(s.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool isServiceAccountSubject(std::string_view s) {
  constexpr std::string_view kPrefix = "system:serviceaccount:";
  if (!s.starts_with(kPrefix)) return false;
  const std::string_view rest = s.substr(kPrefix.size());
  const auto colon = rest.find(':');
  return colon != std::string_view::npos && isDnsLabel(rest.substr(0, colon)) &&
         isDnsSubdomain(rest.substr(colon + 1));
}

StatusOr<ShardMapRef> parseShardMapRef(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) {
    return invalidArgument("shard map must be {namespace}/{name}, got \"" +
                           std::string(text.substr(0, 64)) + "\"");
  }
  ShardMapRef ref{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
  if (!isDnsLabel(ref.ns)) return invalidArgument("shard map namespace is not a valid name");
  if (!isDnsSubdomain(ref.name)) return invalidArgument("shard map name is not a valid name");
  return ref;
}

}  // namespace kshard::protocol
