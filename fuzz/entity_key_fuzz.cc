// Entity keys as they arrive on the app and peer APIs (percent-decoded path segments, so any
// bytes): validateEntityKey, parseMode, the shard of an id (sharding/shard_id.h) and the UTF-8
// functions under them (base/utf8.h), plus the headers that pass through to the app.
//
// Checks: the validator accepts exactly what its contract says; base/utf8 agrees with a reference
// UTF-8 check written from RFC 3629; shardIdOf accepts exactly valid UTF-8, lands in 1..N and
// equals Java's String.hashCode computed here from an independent UTF-16 conversion; no Kshard-*,
// Authorization or hop-by-hop header reaches the app.
#include <cstdint>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "http/message.h"
#include "sharding/shard_id.h"
#include "sidecar/app_host.h"
#include "sidecar/entity_request.h"

namespace kshard::fuzz {
namespace {

// UTF-16 code units of valid UTF-8 `s`, decoded here without base/utf8.
std::vector<char16_t> referenceUtf16(std::string_view s) {
  std::vector<char16_t> units;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const std::size_t len = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    std::uint32_t cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1Fu) : len == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
    for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
    if (cp >= 0x10000) {
      units.push_back(static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10)));
      units.push_back(static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF)));
    } else {
      units.push_back(static_cast<char16_t>(cp));
    }
    i += len;
  }
  return units;
}

bool isTokenName(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

bool mustNotPass(std::string_view name) {
  return sidecar::isHopByHopHeader(name) || http::equalsIgnoreCase(name, "authorization") ||
         (name.size() >= 7 && http::equalsIgnoreCase(name.substr(0, 7), "kshard-"));
}

void checkUtf8(std::string_view s) {
  const bool valid = referenceIsUtf8(s);
  check(validateUtf8(s).ok() == valid, "validateUtf8 agrees with RFC 3629", s);
  // utf8SequenceLength walks the same way.
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t len = utf8SequenceLength(s.substr(i));
    if (len == 0) break;
    check(len <= 4 && i + len <= s.size(), "utf8SequenceLength stays inside the text", s);
    i += len;
  }
  check((i == s.size()) == valid, "utf8SequenceLength walks exactly the valid texts", s);

  std::vector<char16_t> units;
  const Status walked = forEachUtf16Unit(s, [&units](char16_t u) { units.push_back(u); });
  check(walked.ok() == valid, "forEachUtf16Unit fails exactly on invalid UTF-8", s);
  if (valid) check(units == referenceUtf16(s), "forEachUtf16Unit gives the UTF-16 code units", s);
}

}  // namespace

int fuzzOneEntityKey(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const auto shardCount = static_cast<std::int32_t>(
      in.flag() ? in.inRange(sharding::kMinShardCount - 1, sharding::kMaxShardCount + 1)
                : in.inRange(1, 300));
  const std::size_t maxIdBytes = static_cast<std::size_t>(in.inRange(1, 2048));
  const std::size_t headerCount = static_cast<std::size_t>(in.inRange(0, 6));
  http::Headers headers;
  for (std::size_t i = 0; i < headerCount; ++i) {
    const std::string_view name = in.until('\n');
    headers.add(std::string(name), std::string(in.until('\n')));
  }
  const std::string type(in.until('/'));
  const std::string id(in.rest());

  checkUtf8(type);
  checkUtf8(id);

  const sidecar::EntityKey key{type, id};
  const bool keyOk = !type.empty() && type.size() <= sidecar::kMaxEntityTypeBytes &&
                     referenceIsUtf8(type) && !id.empty() && id.size() <= maxIdBytes &&
                     referenceIsUtf8(id);
  const Status validated = sidecar::validateEntityKey(key, maxIdBytes);
  check(validated.ok() == keyOk, "validateEntityKey follows its contract", type + "/" + id);
  if (!validated.ok()) check(!validated.message().empty(), "a refusal says why");

  const auto mode = sidecar::parseMode(id);
  check(mode.has_value() == (id == "ask" || id == "tell"), "parseMode knows only ask and tell", id);

  const StatusOr<sharding::ShardId> shard = sharding::shardIdOf(id, shardCount);
  const bool countOk =
      shardCount >= sharding::kMinShardCount && shardCount <= sharding::kMaxShardCount;
  check(shard.ok() == (countOk && referenceIsUtf8(id)),
        "shardIdOf accepts exactly valid UTF-8 and a valid shard count", id);
  if (shard.ok()) {
    check(*shard >= 1 && *shard <= shardCount, "a shard id lies in 1..N", id);
    std::uint32_t h = 0;
    for (const char16_t u : referenceUtf16(id)) h = 31u * h + u;
    const auto hash = static_cast<std::int32_t>(h);
    const std::int64_t expected = (hash % shardCount < 0 ? -(hash % shardCount) : hash % shardCount) + 1;
    check(*shard == expected, "shardIdOf is abs(javaHash % N) + 1", id);
    const StatusOr<std::int32_t> javaHash = sharding::javaStringHashCode(id);
    check(javaHash.ok() && *javaHash == hash, "javaStringHashCode is Java's String.hashCode", id);
  }

  const http::Headers passed = sidecar::passThroughHeaders(headers);
  std::size_t expectedPassed = 0;
  for (const auto& [name, value] : headers) {
    if (isTokenName(name) && !mustNotPass(name)) ++expectedPassed;
  }
  std::size_t tokenPassed = 0;
  for (const auto& [name, value] : passed) {
    check(!mustNotPass(name), "no Kshard-*, Authorization or hop-by-hop header reaches the app",
          name);
    if (isTokenName(name)) ++tokenPassed;
  }
  check(tokenPassed == expectedPassed, "every other header reaches the app");
  return 0;
}

}  // namespace kshard::fuzz
