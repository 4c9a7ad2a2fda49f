#include "http/router.h"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <cassert>
#include <cstdint>
#include <exception>
#include <utility>

namespace kshard::http {

namespace {

constexpr Method kAllMethods[] = {Method::kGet,     Method::kHead,  Method::kPost,
                                  Method::kPut,     Method::kPatch, Method::kDelete,
                                  Method::kOptions, Method::kTrace};

// Calls `visit` with each segment of "/a/b/c" ("a", "b", "c") until it returns false; "/" is one
// empty segment, as is a trailing "/". Returns false when `visit` stopped it. Patterns and
// request paths are split by this one rule.
template <typename Visit>
bool forEachSegment(std::string_view path, Visit&& visit) {
  for (std::size_t start = 1;;) {
    const std::size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) return visit(path.substr(start));
    if (!visit(path.substr(start, slash - start))) return false;
    start = slash + 1;
  }
}

std::vector<std::string_view> splitPath(std::string_view path) {
  std::vector<std::string_view> segments;
  forEachSegment(path, [&](std::string_view segment) {
    segments.push_back(segment);
    return true;
  });
  return segments;
}

// Which segments of a path a route captured, one bit each: routes have at most kMaxSegments
// segments, so a longer path matches none.
using CaptureMask = std::uint64_t;
constexpr std::size_t kMaxSegments = 64;

bool isCapture(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

std::string_view withoutFragment(std::string_view target) {
  return target.substr(0, target.find('#'));
}

// The path of a request target: before its query and fragment.
std::string_view pathOf(std::string_view target) {
  target = withoutFragment(target);
  return target.substr(0, target.find('?'));
}

}  // namespace

struct Router::Node {
  struct Route {
    Handler handler;
    std::vector<std::string> captureNames;  // in path order
    std::string name;                       // "GET /v1/entities/{type}/{id}", for logs
    RouteOptions options;
  };
  std::map<std::string, std::unique_ptr<Node>, std::less<>> literals;
  std::unique_ptr<Node> capture;
  std::map<Method, Route> routes;
};

// What a path reaches: its segments, decoded (a view of the path itself for a segment without an
// escape, nearly all, of its decoded text in `decodedText` otherwise; inline room for the paths of
// kshard's own APIs), and every node it reaches, literal branches first, so the first candidate
// that has the method is the most specific route; with each, which segments it captured (bit i:
// segment i).
struct Router::Match {
  boost::container::small_vector<std::string_view, 8> segments;
  boost::container::small_vector<std::string, 2> decodedText;
  boost::container::small_vector<std::pair<const Node*, CaptureMask>, 4> candidates;

  const Node::Route* route(Method method) const {
    for (const auto& [node, mask] : candidates) {
      if (const auto it = node->routes.find(method); it != node->routes.end()) return &it->second;
    }
    return nullptr;
  }
};

Router::Router(std::optional<Logger> logger)
    : root_(std::make_unique<Node>()), logger_(std::move(logger)) {}
Router::~Router() = default;
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;

void Router::add(Method method, std::string_view pattern, Handler handler, RouteOptions options) {
  assert(!pattern.empty() && pattern.front() == '/' && "route patterns are absolute paths");
  Node* node = root_.get();
  std::vector<std::string> names;
  const std::vector<std::string_view> segments = splitPath(pattern);
  assert(segments.size() <= kMaxSegments && "a route has at most 64 segments");
  for (const std::string_view segment : segments) {
    if (isCapture(segment)) {
      names.emplace_back(segment.substr(1, segment.size() - 2));
      assert(std::count(names.begin(), names.end(), names.back()) == 1 &&
             "a pattern names each capture once");
      if (node->capture == nullptr) node->capture = std::make_unique<Node>();
      node = node->capture.get();
    } else {
      assert(segment.find_first_of("{}") == std::string_view::npos &&
             "a capture must be a whole segment");
      auto it = node->literals.find(segment);
      if (it == node->literals.end()) {
        it = node->literals.emplace(std::string(segment), std::make_unique<Node>()).first;
      }
      node = it->second.get();
    }
  }
  hasBodyLimits_ = hasBodyLimits_ || options.maxBodyBytes.has_value();
  node->routes[method] =
      Node::Route{std::move(handler), std::move(names),
                  std::string(methodName(method)) + " " + std::string(pattern), options};
}

bool Router::match(std::string_view path, Match& out) const {
  forEachSegment(path, [&out](std::string_view raw) {
    out.segments.push_back(raw);
    return true;
  });
  if (path.find('%') != std::string_view::npos) {
    // Room for every segment first: the views must not move with the strings.
    out.decodedText.reserve(out.segments.size());
    for (std::string_view& segment : out.segments) {
      if (segment.find('%') == std::string_view::npos) continue;
      std::string& text = out.decodedText.emplace_back();
      if (!percentDecode(segment, text)) return false;
      segment = text;
    }
  }
  if (out.segments.size() > kMaxSegments) return true;
  auto walk = [&](auto&& self, const Node* node, std::size_t index, CaptureMask mask) -> void {
    if (index == out.segments.size()) {
      if (!node->routes.empty()) out.candidates.emplace_back(node, mask);
      return;
    }
    const std::string_view segment = out.segments[index];
    if (const auto it = node->literals.find(segment); it != node->literals.end()) {
      self(self, it->second.get(), index + 1, mask);
    }
    if (node->capture != nullptr && !segment.empty()) {
      self(self, node->capture.get(), index + 1, mask | (CaptureMask{1} << index));
    }
  };
  walk(walk, root_.get(), 0, 0);
  return true;
}

std::optional<std::size_t> Router::bodyLimit(Method method, std::string_view target) const {
  if (!hasBodyLimits_) return std::nullopt;
  const std::string_view path = pathOf(target);
  Match match;
  if (path.empty() || path.front() != '/' || !this->match(path, match)) return std::nullopt;
  const Node::Route* route = match.route(method);
  return route != nullptr ? route->options.maxBodyBytes : std::nullopt;
}

void Router::dispatch(Request request, Responder responder) const {
  const std::string_view target = withoutFragment(request.target);
  const std::size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  if (path.empty() || path.front() != '/') {
    responder.send(Response::error(400, "InvalidArgument",
                                   "request target must be an absolute path: " + request.target));
    return;
  }
  request.query.clear();
  if (question != std::string_view::npos &&
      !parseQuery(target.substr(question + 1), request.query)) {
    responder.send(
        Response::error(400, "InvalidArgument", "malformed percent-escape in the query string"));
    return;
  }
  Match match;
  if (!this->match(path, match)) {
    responder.send(Response::error(400, "InvalidArgument", "malformed percent-escape in the path"));
    return;
  }

  for (const auto& [node, mask] : match.candidates) {
    const auto route = node->routes.find(request.method);
    if (route == node->routes.end()) continue;
    const std::vector<std::string>& names = route->second.captureNames;
    request.params.clear();
    request.params.reserve(names.size());
    std::size_t name = 0;
    for (std::size_t i = 0; i < match.segments.size(); ++i) {
      if (mask & (CaptureMask{1} << i)) {
        request.params.emplace_back(names[name++], match.segments[i]);
      }
    }
    try {
      route->second.handler(std::move(request), std::move(responder));
    } catch (const std::exception& e) {
      // The handler owned the Responder; unwinding destroyed it, which answered 500. It owned
      // the request too, so `path` (a view of its target) is gone: the route names the handler.
      if (logger_) {
        logger_->error("http handler threw", {{"route", route->second.name}, {"error", e.what()}});
      }
    }
    return;
  }

  if (match.candidates.empty()) {
    responder.send(Response::error(
        404, "NotFound",
        "no route for " + std::string(methodName(request.method)) + " " + std::string(path)));
    return;
  }
  std::string allow;
  for (const Method m : kAllMethods) {
    for (const auto& candidate : match.candidates) {
      if (candidate.first->routes.contains(m)) {
        if (!allow.empty()) allow += ", ";
        allow += methodName(m);
        break;
      }
    }
  }
  Response response = Response::error(
      405, "MethodNotAllowed",
      std::string(methodName(request.method)) + " is not allowed on " + std::string(path));
  response.headers.set("Allow", allow);
  responder.send(std::move(response));
}

bool parseQuery(std::string_view query, std::map<std::string, std::string>& out) {
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view pair = query.substr(start, end - start);
    if (!pair.empty()) {
      const std::size_t eq = pair.find('=');
      std::string key;
      std::string value;
      if (!percentDecode(pair.substr(0, eq), key, true)) return false;
      if (eq != std::string_view::npos && !percentDecode(pair.substr(eq + 1), value, true)) {
        return false;
      }
      out.emplace(std::move(key), std::move(value));
    }
    start = end + 1;
  }
  return true;
}

}  // namespace kshard::http
