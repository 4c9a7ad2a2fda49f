#include "http/internal/origin.h"

#include <charconv>

namespace kshard::http {

StatusOr<Origin> parseOrigin(const std::string& baseUrl) {
  Origin o;
  std::string_view rest = baseUrl;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    o.tls = true;
  } else {
    return invalidArgument("base URL must start with http:// or https://: " + baseUrl);
  }
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.empty() || rest.find_first_of("/?#@") != std::string_view::npos) {
    return invalidArgument("base URL must be scheme://host[:port] without a path: " + baseUrl);
  }
  std::string_view portText;
  if (rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return invalidArgument("unclosed IPv6 host in " + baseUrl);
    o.host = std::string(rest.substr(1, close - 1));
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return invalidArgument("malformed host in " + baseUrl);
      portText = after.substr(1);
    }
  } else {
    const std::size_t colon = rest.rfind(':');
    o.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) portText = rest.substr(colon + 1);
  }
  if (o.host.empty()) return invalidArgument("base URL has no host: " + baseUrl);
  const std::uint16_t defaultPort = o.tls ? 443 : 80;
  o.port = defaultPort;
  if (!portText.empty()) {
    unsigned value = 0;
    const auto [end, ec] =
        std::from_chars(portText.data(), portText.data() + portText.size(), value);
    if (ec != std::errc() || end != portText.data() + portText.size() || value == 0 ||
        value > 65535) {
      return invalidArgument("malformed port in base URL " + baseUrl);
    }
    o.port = static_cast<std::uint16_t>(value);
  }
  const std::string bracketed = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  o.hostHeader = o.port == defaultPort ? bracketed : bracketed + ":" + std::to_string(o.port);
  o.url = std::string(o.tls ? "https://" : "http://") + bracketed + ":" + std::to_string(o.port);
  return o;
}

}  // namespace kshard::http
