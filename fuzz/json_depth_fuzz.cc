// The JSON depth check every network body of the operator goes through before it is parsed
// (protocol/json_limits.h). Its one pass over the bytes must agree with nlohmann's parser, which
// is what it protects:
//  - sound: when the check passes at depth d, the parser nests no deeper than d before it
//    accepts the text or fails, whatever the text;
//  - exact on JSON: a valid document of depth m passes at m and is refused at m - 1.
// The first byte picks d (0..31); the rest is the text.
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "protocol/json_limits.h"

namespace kshard::fuzz {
namespace {

using nlohmann::json;

// A SAX handler that only measures how deep the parser went.
struct DepthMeter {
  std::size_t depth = 0;
  std::size_t most = 0;

  bool open() {
    most = std::max(most, ++depth);
    return true;
  }
  bool close() {
    --depth;
    return true;
  }
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return open(); }
  bool key(json::string_t&) { return true; }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }
};

}  // namespace

int fuzzOneJsonDepth(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const auto limit = static_cast<std::size_t>(in.inRange(0, 31));
  const std::string text(in.rest());
  DepthMeter meter;
  const bool valid = json::sax_parse(text, &meter);
  if (protocol::checkJsonDepth(text, limit).ok()) {
    check(meter.most <= limit, "the parser nests no deeper than a depth the check passed",
          std::to_string(limit) + " < " + std::to_string(meter.most) + ": " + text);
  }
  if (valid) {
    check(protocol::checkJsonDepth(text, meter.most).ok(),
          "a valid document passes at its own depth", text);
    check(meter.most == 0 || !protocol::checkJsonDepth(text, meter.most - 1).ok(),
          "a valid document is refused below its depth", text);
  }
  return 0;
}

}  // namespace kshard::fuzz
