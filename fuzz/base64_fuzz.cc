// Base64 (base/base64.h): the standard alphabet reads Kubernetes []byte fields; the URL-safe one
// will read the segments of JWTs on the authenticated paths.
//
// Checks: both decoders accept only their alphabet (the standard one also skips CR and LF) and
// lengths that base64 can produce, and only canonical text (re-encoding gives the input back);
// decode(encode(x)) == x for both alphabets; encoding lengths.
#include <cstdint>
#include <string>

#include "base/base64.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"

namespace kshard::fuzz {
namespace {

bool isAlpha(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

}  // namespace

int fuzzOneBase64(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  const std::string std64 = base64Encode(bytes);
  check(std64.size() == (size + 2) / 3 * 4, "standard encoding has padded length", bytes);
  const auto stdBack = base64Decode(std64);
  check(stdBack.has_value() && *stdBack == bytes, "base64Decode(base64Encode(x)) == x", bytes);

  const std::string url64 = base64UrlEncode(bytes);
  check(url64.size() == (size * 4 + 2) / 3, "URL-safe encoding has no padding", bytes);
  for (const char c : url64) {
    check(isAlpha(c) || c == '-' || c == '_', "URL-safe encoding uses its alphabet", url64);
  }
  const auto urlBack = base64UrlDecode(url64);
  check(urlBack.has_value() && *urlBack == bytes, "base64UrlDecode(base64UrlEncode(x)) == x",
        bytes);

  // The input as text to decode.
  if (const auto decoded = base64Decode(bytes)) {
    std::size_t symbols = 0;
    for (const char c : bytes) {
      if (c == '\r' || c == '\n') continue;
      check(isAlpha(c) || c == '+' || c == '/' || c == '=', "standard decoding takes its alphabet",
            bytes);
      ++symbols;
    }
    check(symbols % 4 == 0, "standard decoding needs padded length", bytes);
    check(decoded->size() <= symbols / 4 * 3, "decoded size fits the symbols", bytes);
    std::string clean(bytes);
    std::erase_if(clean, [](char c) { return c == '\r' || c == '\n'; });
    check(base64Encode(*decoded) == clean, "only canonical text decodes (RFC 4648 3.5)", bytes);
  }
  if (const auto decoded = base64UrlDecode(bytes)) {
    for (const char c : bytes) {
      check(isAlpha(c) || c == '-' || c == '_' || c == '=', "URL-safe decoding takes its alphabet",
            bytes);
    }
    std::string_view unpadded = bytes;
    while (!unpadded.empty() && unpadded.back() == '=') unpadded.remove_suffix(1);
    check(base64UrlEncode(*decoded) == unpadded, "only canonical text decodes (RFC 4648 3.5)",
          bytes);
  }
  return 0;
}

}  // namespace kshard::fuzz
