// The JSON bodies of the manager API and the peer API's control calls (protocol/wire.h), which
// every decoder takes straight from the network, and the "{namespace}/{name}" ShardMap references.
//
// Checks: every field a decoder accepts is valid UTF-8 within its documented length, required
// strings are non-empty, addresses are host:port with a port in 1..65535, shard sets lie in
// 1..shardCount; encoding what was decoded and decoding it again gives the same value; a ShardMap
// reference round-trips through toString.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "protocol/wire.h"

namespace kshard::fuzz {
namespace {

using namespace protocol;

void checkField(const std::string& value, std::size_t maxBytes, bool required,
                std::string_view what) {
  check(referenceIsUtf8(value), "decoded strings are valid UTF-8", what);
  check(value.size() <= maxBytes, "decoded strings respect their length limit", what);
  if (required) check(!value.empty(), "required strings are not empty", what);
}

void checkAddress(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  check(colon != std::string::npos && colon > 0, "an address is host:port", address);
  const std::string port = address.substr(colon + 1);
  check(!port.empty() && port.size() <= 5 &&
            port.find_first_not_of("0123456789") == std::string::npos,
        "the port is a number", address);
  check(port[0] != '0', "the port has no leading zero", address);
  const int value = std::stoi(port);
  check(value >= 1 && value <= 65535, "the port is in 1..65535", address);
}

void checkShards(const sharding::ShardSet& set, std::int32_t shardCount) {
  for (const auto& r : set.ranges()) {
    check(r.first >= 1 && r.last <= shardCount, "decoded shards lie in 1..shardCount");
  }
}

void fuzzRef(std::string_view text) {
  auto ref = parseShardMapRef(text);
  if (!ref.ok()) return;
  check(isDnsLabel(ref->ns) && isDnsSubdomain(ref->name), "a reference names valid objects", text);
  check(ref->toString() == text, "toString gives back the reference", text);
  auto again = parseShardMapRef(ref->toString());
  check(again.ok() && *again == *ref, "a reference round-trips", text);
}

}  // namespace

int fuzzOneWire(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const int which = static_cast<int>(in.inRange(0, 8));
  const auto shardCount = static_cast<std::int32_t>(in.inRange(1, 1000));
  const std::string_view body = in.rest();

  switch (which) {
    case 0: {
      auto r = decodeRegisterRequest(body);
      if (!r.ok()) break;
      checkField(r->pod, 253, true, "pod");
      checkField(r->uid, 128, true, "uid");
      checkField(r->address, 261, true, "address");
      checkField(r->version, 63, false, "version");
      checkAddress(r->address);
      auto again = decodeRegisterRequest(encode(*r));
      check(again.ok() && again->pod == r->pod && again->uid == r->uid &&
                again->address == r->address && again->version == r->version,
            "RegisterRequest round-trips", body);
      break;
    }
    case 1: {
      auto r = decodeEpochResponse(body);
      if (!r.ok()) break;
      auto again = decodeEpochResponse(encode(*r));
      check(again.ok() && again->epoch == r->epoch, "EpochResponse round-trips", body);
      break;
    }
    case 2: {
      auto r = decodeUnregisterRequest(body);
      if (!r.ok()) break;
      checkField(r->pod, 253, true, "pod");
      checkField(r->uid, 128, true, "uid");
      auto again = decodeUnregisterRequest(encode(*r));
      check(again.ok() && again->pod == r->pod && again->uid == r->uid,
            "UnregisterRequest round-trips", body);
      break;
    }
    case 3: {
      auto r = decodeNotifyUnhealthyRequest(body);
      if (!r.ok()) break;
      checkField(r->pod, 253, true, "pod");
      auto again = decodeNotifyUnhealthyRequest(encode(*r));
      check(again.ok() && again->pod == r->pod, "NotifyUnhealthyRequest round-trips", body);
      break;
    }
    case 4: {
      auto r = decodePingResponse(body);
      if (!r.ok()) break;
      checkField(r->pod, 253, true, "pod");
      checkField(r->uid, 128, false, "uid");
      checkField(r->shards, 1u << 20, false, "shards");
      auto again = decodePingResponse(encode(*r));
      check(again.ok() && again->pod == r->pod && again->uid == r->uid &&
                again->epoch == r->epoch && again->shards == r->shards,
            "PingResponse round-trips", body);
      break;
    }
    case 5: {
      auto r = decodeShardsRequest(body, shardCount);
      if (!r.ok()) break;
      checkField(r->shardMap, 2 * 253 + 1, true, "shardMap");
      check(parseShardMapRef(r->shardMap).ok(), "a decoded shardMap is a valid reference");
      checkShards(r->shards, shardCount);
      auto again = decodeShardsRequest(encode(*r), shardCount);
      check(again.ok() && again->shardMap == r->shardMap && again->epoch == r->epoch &&
                again->shards == r->shards,
            "ShardsRequest round-trips", body);
      break;
    }
    case 6: {
      auto r = decodeAssignResponse(body, shardCount);
      if (!r.ok()) break;
      checkShards(r->refused, shardCount);
      auto again = decodeAssignResponse(encode(*r), shardCount);
      check(again.ok() && again->refused == r->refused, "AssignResponse round-trips", body);
      break;
    }
    case 7: {
      auto r = decodeUnregisterDeferred(body);
      if (!r.ok()) break;
      checkField(r->message, 4096, false, "message");
      checkField(r->version, 63, false, "version");
      check(r->retryAfterMs >= 0 && r->deferredForMs >= 0 && r->startingPods >= 0,
            "decoded counts are non-negative", body);
      auto again = decodeUnregisterDeferred(encode(*r));
      check(again.ok() && again->message == r->message && again->retryAfterMs == r->retryAfterMs &&
                again->deferredForMs == r->deferredForMs && again->version == r->version &&
                again->startingPods == r->startingPods,
            "UnregisterDeferred round-trips", body);
      break;
    }
    default:
      fuzzRef(body);
      break;
  }
  return 0;
}

}  // namespace kshard::fuzz
