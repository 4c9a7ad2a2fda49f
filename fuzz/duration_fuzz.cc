// Kubernetes duration strings (sharding/duration.h) from a ShardMap spec ("20s", "1m30s"): the
// spec round-trips through the API server, so parse and format must be exact inverses.
//
// Checks: whatever parses formats to a string that parses to the same duration and formats to
// itself; every int64 nanosecond count formats to text that parses back to it.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "sharding/duration.h"

namespace kshard::fuzz {

int fuzzOneDuration(const std::uint8_t* data, std::size_t size) {
  using sharding::Duration;
  if (size >= 8) {
    std::int64_t nanos = 0;
    std::memcpy(&nanos, data, sizeof nanos);
    const std::string text = sharding::formatDuration(Duration(nanos));
    const auto back = sharding::parseDuration(text);
    check(back.ok() && back->count() == nanos, "parse(format(d)) == d", text);
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = sharding::parseDuration(text);
  if (!parsed.ok()) {
    check(!parsed.status().message().empty(), "a parse error says what is wrong");
    return 0;
  }
  const std::string formatted = sharding::formatDuration(*parsed);
  const auto again = sharding::parseDuration(formatted);
  check(again.ok() && *again == *parsed, "format(parse(s)) parses to the same duration",
        std::string(text) + " -> " + formatted);
  check(sharding::formatDuration(*again) == formatted, "format is a fixed point", formatted);
  return 0;
}

}  // namespace kshard::fuzz
