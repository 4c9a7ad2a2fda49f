// UTF-8 validation and decoding. Entity ids and other names arrive as UTF-8 from the network;
// malformed input is reported, never trusted.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kshard {

// Length (1..4) of the well-formed UTF-8 sequence at the start of `s`, or 0 when it is malformed
// (overlong forms, surrogates, code points above U+10FFFF, truncation and stray continuation bytes
// are all malformed, as in RFC 3629).
std::size_t utf8SequenceLength(std::string_view s);

// OK when all of `s` is well-formed UTF-8; otherwise names the byte offset of the first bad byte.
Status validateUtf8(std::string_view s);

// Calls `f(char16_t)` for each UTF-16 code unit of `s` (astral code points as surrogate pairs).
// Returns the validation error, without calling `f` further, on malformed input.
template <typename F>
Status forEachUtf16Unit(std::string_view s, F&& f);

// Decoded code point of a well-formed sequence of `len` bytes.
char32_t decodeUtf8Sequence(std::string_view s, std::size_t len);

template <typename F>
Status forEachUtf16Unit(std::string_view s, F&& f) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      f(static_cast<char16_t>(c));
      ++i;
      continue;
    }
    const std::size_t len = utf8SequenceLength(s.substr(i));
    if (len == 0) return validateUtf8(s);
    const char32_t cp = decodeUtf8Sequence(s.substr(i), len);
    if (cp >= 0x10000) {
      const char32_t v = cp - 0x10000;
      f(static_cast<char16_t>(0xD800 + (v >> 10)));
      f(static_cast<char16_t>(0xDC00 + (v & 0x3FF)));
    } else {
      f(static_cast<char16_t>(cp));
    }
    i += len;
  }
  return {};
}

}  // namespace kshard
