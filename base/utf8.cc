#include "base/utf8.h"

namespace kshard {
namespace {

bool isContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

std::size_t utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (c < 0xE0) return s.size() >= 2 && isContinuation(b(1)) ? 2 : 0;
  if (c < 0xF0) {
    if (s.size() < 3 || !isContinuation(b(1)) || !isContinuation(b(2))) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c < 0xF5) {
    if (s.size() < 4 || !isContinuation(b(1)) || !isContinuation(b(2)) || !isContinuation(b(3))) {
      return 0;
    }
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

Status validateUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t len = utf8SequenceLength(s.substr(i));
    if (len == 0) {
      return invalidArgument("invalid UTF-8 at byte " + std::to_string(i));
    }
    i += len;
  }
  return {};
}

char32_t decodeUtf8Sequence(std::string_view s, std::size_t len) {
  const auto b = [&s](std::size_t i) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i]));
  };
  switch (len) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

}  // namespace kshard
