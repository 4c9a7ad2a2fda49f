// HTTP routing (http/router.h) of request targets from the network, over the routes of the
// sidecar's app, peer and admin APIs and the operator's manager API, plus routes that make the
// literal-versus-capture choice and the fallback interesting.
//
// The router is checked against a reference written from its contract: split the path on '/',
// percent-decode each segment, take the matching route that is most specific (a literal beats a
// capture, position by position), 405 with an Allow header when only other methods match, 404
// when nothing does, 400 for a malformed target or escape. So a capture is always exactly one
// decoded segment: an id sent as "a%2Fb" arrives as "a/b" and never swallows two segments.
// Also checked: the router's own error bodies are kshard's JSON error shape, a handler that
// throws gets its request answered 500, every request gets exactly one answer, log lines stay
// valid JSON, and percentDecode(percentEncode(x)) == x.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz/checked_logger.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "http/message.h"
#include "http/router.h"

namespace kshard::fuzz {
namespace {

using http::Method;

constexpr Method kMethods[] = {Method::kGet,   Method::kHead,   Method::kPost,    Method::kPut,
                               Method::kPatch, Method::kDelete, Method::kOptions, Method::kTrace};

struct Route {
  Method method;
  std::string_view pattern;
};

constexpr Route kRoutes[] = {
    // Sidecar app API.
    {Method::kPost, "/v1/entities/{type}/{id}"},
    {Method::kPost, "/v1/drain"},
    {Method::kGet, "/v1/shard-map"},
    // Sidecar peer API.
    {Method::kPost, "/v1/peer/entities/{type}/{id}"},
    {Method::kGet, "/v1/ping"},
    {Method::kPost, "/v1/shards/assign"},
    {Method::kPost, "/v1/shards/unassign"},
    // Admin.
    {Method::kGet, "/metrics"},
    {Method::kGet, "/healthz"},
    {Method::kGet, "/readyz"},
    {Method::kGet, "/v1/drain"},
    // Operator manager API.
    {Method::kPost, "/v1/shardmaps/{namespace}/{name}/register"},
    {Method::kPost, "/v1/shardmaps/{namespace}/{name}/unregister"},
    {Method::kPost, "/v1/shardmaps/{namespace}/{name}/notify-unhealthy"},
    {Method::kGet, "/v1/shardmaps/{namespace}/{name}/assignments"},
    // A capture beside literals ("/v1/shards/assign" must win for POST), a literal branch that
    // leads nowhere ("/v1/shards/list" falls back to the capture), the root, and a handler that
    // throws.
    {Method::kGet, "/v1/shards/{shard}"},
    {Method::kDelete, "/v1/shards/{shard}"},
    {Method::kGet, "/v1/{kind}/list"},
    {Method::kPost, "/v1/entities/{type}/{id}/stop"},
    {Method::kGet, "/"},
    {Method::kPut, "/v1/throw/{what}"},
};

std::vector<std::string_view> split(std::string_view path) {
  std::vector<std::string_view> out;
  std::size_t start = 1;
  while (true) {
    const std::size_t slash = path.find('/', start);
    out.push_back(path.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

bool isCapture(std::string_view segment) { return !segment.empty() && segment.front() == '{'; }

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> referenceDecode(std::string_view in, bool plusIsSpace) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      const int hi = hex(in[i + 1]);
      const int lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += (plusIsSpace && in[i] == '+') ? ' ' : in[i];
    }
  }
  return out;
}

// "k=v&k2=v2", read a character at a time (the router splits with find): '&' ends a pair and the
// first '=' of a pair ends its key; a pair with no character is skipped, one without '=' has an
// empty value; the first of repeated keys wins. Escapes are decoded after the split, so "%26"
// and "%3D" are data. nullopt on a bad escape.
std::optional<std::map<std::string, std::string>> referenceQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  std::string key;
  std::string value;
  bool seen = false;     // the pair has a character
  bool inValue = false;  // its '=' was seen
  const auto endPair = [&]() -> bool {
    if (seen) {
      auto k = referenceDecode(key, true);
      auto v = referenceDecode(value, true);
      if (!k || !v) return false;
      out.emplace(std::move(*k), std::move(*v));
    }
    key.clear();
    value.clear();
    seen = inValue = false;
    return true;
  };
  for (const char c : query) {
    if (c == '&') {
      if (!endPair()) return std::nullopt;
      continue;
    }
    seen = true;
    if (c == '=' && !inValue) {
      inValue = true;
    } else {
      (inValue ? value : key) += c;
    }
  }
  if (!endPair()) return std::nullopt;
  return out;
}

struct Expected {
  int status = 0;  // 200 or 500: a route's handler ran; else the router's own answer
  const Route* route = nullptr;
  std::map<std::string, std::string> params;
  std::vector<Method> allow;  // for 405
  std::string rawPath;
  std::map<std::string, std::string> query;
};

Expected answeredByRouter(int status) {
  Expected e;
  e.status = status;
  return e;
}

Expected expect(Method method, std::string_view target) {
  Expected e;
  target = target.substr(0, target.find('#'));
  const std::size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  if (path.empty() || path.front() != '/') return answeredByRouter(400);
  e.rawPath = std::string(path);
  if (question != std::string_view::npos) {
    auto query = referenceQuery(target.substr(question + 1));
    if (!query) return answeredByRouter(400);
    e.query = std::move(*query);
  }
  std::vector<std::string> segments;
  for (const std::string_view raw : split(path)) {
    auto decoded = referenceDecode(raw, false);
    if (!decoded) return answeredByRouter(400);
    segments.push_back(std::move(*decoded));
  }
  // Every route that matches; for the request's method, the most specific one.
  std::vector<bool> bestShape;
  bool anyMatch = false;
  for (const Route& route : kRoutes) {
    const std::vector<std::string_view> pattern = split(route.pattern);
    if (pattern.size() != segments.size()) continue;
    bool matches = true;
    std::vector<bool> shape;  // false for a literal, which sorts before a capture
    std::map<std::string, std::string> params;
    for (std::size_t i = 0; i < pattern.size() && matches; ++i) {
      shape.push_back(isCapture(pattern[i]));
      if (isCapture(pattern[i])) {
        matches = !segments[i].empty();
        params[std::string(pattern[i].substr(1, pattern[i].size() - 2))] = segments[i];
      } else {
        matches = pattern[i] == segments[i];
      }
    }
    if (!matches) continue;
    anyMatch = true;
    if (std::find(e.allow.begin(), e.allow.end(), route.method) == e.allow.end()) {
      e.allow.push_back(route.method);
    }
    if (route.method == method && (e.route == nullptr || shape < bestShape)) {
      e.route = &route;
      bestShape = std::move(shape);
      e.params = std::move(params);
    }
  }
  if (e.route != nullptr) {
    e.status = e.route->pattern.starts_with("/v1/throw/") ? 500 : 200;
  } else {
    e.status = anyMatch ? 405 : 404;
  }
  return e;
}

// What the handler saw.
struct Seen {
  const Route* route = nullptr;
  http::Request request;
};

void checkErrorBody(const http::Response& r, std::string_view code, std::string_view target) {
  check(r.headers.get("Content-Type") == "application/json", "errors are JSON", target);
  const auto body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  check(!body.is_discarded() && body.is_object() && body.contains("error") &&
            body["error"].is_object(),
        "an error body is {\"error\": {...}}", r.body);
  const auto& error = body["error"];
  check(error.contains("code") && error["code"] == code, "the error code fits the status", r.body);
  check(error.contains("message") && error["message"].is_string() &&
            !error["message"].get<std::string>().empty(),
        "an error says what is wrong", r.body);
}

void checkPercentRoundTrip(std::string_view bytes) {
  const std::string encoded = http::percentEncode(bytes);
  for (const char c : encoded) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                            c == '~' || c == '%';
    check(unreserved, "percentEncode leaves only unreserved characters and escapes", encoded);
  }
  std::string decoded;
  check(http::percentDecode(encoded, decoded) && decoded == bytes,
        "percentDecode(percentEncode(x)) == x", bytes);
  check(split("/" + encoded).size() == 1, "an encoded id is a single path segment", bytes);
}

}  // namespace

int fuzzOneRouter(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const Method method = kMethods[in.inRange(0, std::size(kMethods) - 1)];
  const std::string target(in.rest());

  Seen seen;
  http::Router router(checkedLogger("router-fuzz"));
  for (const Route& route : kRoutes) {
    router.add(route.method, route.pattern, [&seen, &route](http::Request r, http::Responder res) {
      seen.route = &route;
      seen.request = std::move(r);
      if (route.pattern.starts_with("/v1/throw/")) throw std::runtime_error("handler failed");
      res.send(http::Response::json(200, "{}"));
    });
  }

  int answers = 0;
  http::Response answer;
  http::Request request;
  request.method = method;
  request.target = target;
  router.dispatch(std::move(request), http::Responder([&](http::Response r) {
                    ++answers;
                    answer = std::move(r);
                  }));
  check(answers == 1, "every request is answered exactly once", target);

  const Expected e = expect(method, target);
  check(answer.status == e.status, "the router answers what its contract says",
        target + " -> " + std::to_string(answer.status) + ", expected " + std::to_string(e.status));
  check((seen.route != nullptr) == (e.route != nullptr), "a handler runs exactly when one matches",
        target);
  if (e.route != nullptr) {
    check(seen.route == e.route, "the most specific route wins",
          target + " -> " + std::string(seen.route->pattern) + ", expected " +
              std::string(e.route->pattern));
    check(std::map<std::string, std::string>(seen.request.params.begin(),
                                             seen.request.params.end()) == e.params &&
              seen.request.params.size() == e.params.size(),
          "each capture is exactly one percent-decoded segment, never more", target);
    check(seen.request.path() == e.rawPath, "request.path is the raw path", target);
    check(seen.request.query == e.query, "query parameters are decoded, first one wins", target);
    for (const auto& [name, value] : seen.request.params) {
      check(!value.empty(), "captures are never empty", target);
    }
  }
  switch (answer.status) {
    case 400:
      checkErrorBody(answer, "InvalidArgument", target);
      break;
    case 404:
      checkErrorBody(answer, "NotFound", target);
      break;
    case 405: {
      checkErrorBody(answer, "MethodNotAllowed", target);
      std::string allow;
      for (const Method m : kMethods) {
        if (std::find(e.allow.begin(), e.allow.end(), m) == e.allow.end()) continue;
        if (!allow.empty()) allow += ", ";
        allow += http::methodName(m);
      }
      check(answer.headers.get("Allow") == allow, "405 lists the allowed methods", target);
      break;
    }
    case 500:
      checkErrorBody(answer, "Internal", target);
      break;
    default:
      break;
  }

  // The codec the clients use to build such targets.
  checkPercentRoundTrip(target);
  std::map<std::string, std::string> query;
  const bool queryOk = http::parseQuery(target, query);
  const auto reference = referenceQuery(target);
  check(queryOk == reference.has_value(), "parseQuery rejects exactly malformed escapes", target);
  if (queryOk) check(query == *reference, "parseQuery decodes like the reference", target);
  return 0;
}

}  // namespace kshard::fuzz
