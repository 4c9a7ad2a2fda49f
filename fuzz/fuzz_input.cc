#include "fuzz/fuzz_input.h"

#include <cstdio>
#include <cstdlib>

namespace kshard::fuzz {

std::int64_t FuzzInput::inRange(std::int64_t min, std::int64_t max) {
  const std::uint64_t span = static_cast<std::uint64_t>(max) - static_cast<std::uint64_t>(min);
  std::uint64_t value = 0;
  for (std::uint64_t covered = 0; covered < span && !data_.empty(); covered = (covered << 8) | 0xFF) {
    value = (value << 8) | byte();
  }
  if (span != UINT64_MAX) value %= span + 1;
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(min) + value);
}

std::string_view FuzzInput::take(std::size_t n) {
  const std::string_view out = data_.substr(0, n);
  data_.remove_prefix(out.size());
  return out;
}

std::string_view FuzzInput::until(char separator) {
  const std::size_t at = data_.find(separator);
  if (at == std::string_view::npos) return rest();
  const std::string_view out = data_.substr(0, at);
  data_.remove_prefix(at + 1);
  return out;
}

std::string printable(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : s.substr(0, 2000)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  if (s.size() > 2000) out += "...";
  return out;
}

void fail(std::string_view property, std::string_view detail) {
  std::fprintf(stderr, "fuzz property failed: %.*s\n", static_cast<int>(property.size()),
               property.data());
  if (!detail.empty()) {
    const std::string shown = printable(detail);
    std::fprintf(stderr, "  detail: %s\n", shown.c_str());
  }
  std::fflush(stderr);
  std::abort();
}

bool referenceIsUtf8(std::string_view s) {
  // RFC 3629, section 4: the well-formed byte sequences, row by row.
  const auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const auto at = [&](std::size_t k) -> unsigned char {
      return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
    };
    std::size_t len = 0;
    if (b0 <= 0x7F) {
      len = 1;
    } else if (in(b0, 0xC2, 0xDF)) {
      len = in(at(1), 0x80, 0xBF) ? 2 : 0;
    } else if (b0 == 0xE0) {
      len = in(at(1), 0xA0, 0xBF) && in(at(2), 0x80, 0xBF) ? 3 : 0;
    } else if (in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) {
      len = in(at(1), 0x80, 0xBF) && in(at(2), 0x80, 0xBF) ? 3 : 0;
    } else if (b0 == 0xED) {
      len = in(at(1), 0x80, 0x9F) && in(at(2), 0x80, 0xBF) ? 3 : 0;
    } else if (b0 == 0xF0) {
      len = in(at(1), 0x90, 0xBF) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF) ? 4 : 0;
    } else if (in(b0, 0xF1, 0xF3)) {
      len = in(at(1), 0x80, 0xBF) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF) ? 4 : 0;
    } else if (b0 == 0xF4) {
      len = in(at(1), 0x80, 0x8F) && in(at(2), 0x80, 0xBF) && in(at(3), 0x80, 0xBF) ? 4 : 0;
    }
    if (len == 0 || i + len > s.size()) return false;
    i += len;
  }
  return true;
}

}  // namespace kshard::fuzz
