// FuzzInput: carves typed values out of a fuzzer's bytes (a count, a flag, a split point, the
// text that follows), and the property checks every harness uses.
//
// Values are taken from the front; once the bytes run out every read returns its smallest value,
// so any input, however short, is a valid run. Harnesses take their small structured choices
// first and leave the text under test for last (FuzzInput::rest), so seed files stay readable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kshard::fuzz {

class FuzzInput {
 public:
  FuzzInput(const std::uint8_t* data, std::size_t size)
      : data_(reinterpret_cast<const char*>(data), size) {}

  std::uint8_t byte() {
    if (data_.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(data_.front());
    data_.remove_prefix(1);
    return b;
  }
  bool flag() { return (byte() & 1) != 0; }
  // A value in min..max (min <= max) from as few bytes as the span needs.
  std::int64_t inRange(std::int64_t min, std::int64_t max);
  // The next `n` bytes (fewer at the end).
  std::string_view take(std::size_t n);
  // Up to the first `separator` (which is consumed), or everything left.
  std::string_view until(char separator);
  std::string_view rest() {
    const std::string_view r = data_;
    data_ = {};
    return r;
  }
  bool empty() const { return data_.empty(); }
  std::size_t remaining() const { return data_.size(); }

 private:
  std::string_view data_;
};

// Reports a broken property and aborts, which libFuzzer records as a crash (and the replay test as
// a failure). `detail` is printed with non-printable bytes escaped.
[[noreturn]] void fail(std::string_view property, std::string_view detail = {});

inline void check(bool holds, std::string_view property, std::string_view detail = {}) {
  if (!holds) fail(property, detail);
}

// `s` with bytes outside printable ASCII written as \xNN, for messages.
std::string printable(std::string_view s);

// A reference UTF-8 check written from RFC 3629's table (not from base/utf8.cc), for harnesses
// that compare the production validator against it.
bool referenceIsUtf8(std::string_view s);

}  // namespace kshard::fuzz
