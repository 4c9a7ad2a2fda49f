#include "base/base64.h"

#include <cstdint>

namespace kshard {
namespace {

constexpr char kStd[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string encode(std::string_view in, const char* alphabet, bool pad) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const std::uint32_t v = (static_cast<std::uint8_t>(in[i]) << 16) |
                            (static_cast<std::uint8_t>(in[i + 1]) << 8) |
                            static_cast<std::uint8_t>(in[i + 2]);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  const std::size_t rest = in.size() - i;
  if (rest > 0) {
    std::uint32_t v = static_cast<std::uint8_t>(in[i]) << 16;
    if (rest == 2) v |= static_cast<std::uint8_t>(in[i + 1]) << 8;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    if (rest == 2) out += alphabet[(v >> 6) & 63];
    if (pad) out.append(rest == 1 ? "==" : "=");
  }
  return out;
}

int value(char c, bool url) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == (url ? '-' : '+')) return 62;
  if (c == (url ? '_' : '/')) return 63;
  return -1;
}

// Decodes groups of four; `padRequired` makes the total length a multiple of four.
std::optional<std::string> decode(std::string_view in, bool url, bool padRequired) {
  std::string clean;
  clean.reserve(in.size());
  for (char c : in) {
    if (!url && (c == '\r' || c == '\n')) continue;
    clean += c;
  }
  std::size_t padding = 0;
  while (!clean.empty() && clean.back() == '=') {
    clean.pop_back();
    ++padding;
  }
  if (padding > 2) return std::nullopt;
  const std::size_t total = clean.size() + padding;
  if (padRequired && total % 4 != 0) return std::nullopt;
  if (padding > 0 && total % 4 != 0) return std::nullopt;
  if (clean.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(clean.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : clean) {
    const int v = value(c, url);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  // Leftover bits must be zero, or the text is not canonical (RFC 4648 3.5).
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace

std::string base64Encode(std::string_view bytes) { return encode(bytes, kStd, true); }
std::string base64UrlEncode(std::string_view bytes) { return encode(bytes, kUrl, false); }
std::optional<std::string> base64Decode(std::string_view text) { return decode(text, false, true); }
std::optional<std::string> base64UrlDecode(std::string_view text) {
  return decode(text, true, false);
}

}  // namespace kshard
