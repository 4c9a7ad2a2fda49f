// Base64 (RFC 4648): the standard alphabet with padding (Kubernetes' []byte fields, JSON patches
// in admission responses) and the URL-safe alphabet without padding (JWTs).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kshard {

std::string base64Encode(std::string_view bytes);
std::string base64UrlEncode(std::string_view bytes);  // no padding

// Standard alphabet; padding required as in Go's StdEncoding, '\r' and '\n' skipped.
// nullopt for any other character or a bad length.
std::optional<std::string> base64Decode(std::string_view text);
// URL-safe alphabet, padding optional (JWT segments have none).
std::optional<std::string> base64UrlDecode(std::string_view text);

}  // namespace kshard
