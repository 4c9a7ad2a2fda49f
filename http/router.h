// Router: picks the handler for a request by method and path pattern. Pure (no I/O), shared by
// every server adapter so that all of them route, decode and answer routing errors alike.
//
// Patterns are absolute paths whose segments are literals or captures: "/v1/entities/{type}/{id}".
// A capture matches exactly one non-empty segment. The request path is split on '/' first and each
// segment percent-decoded afterwards, so an id sent as "a%2Fb" is captured as "a/b" and never spans
// two segments. At every position a literal beats a capture ("/v1/shards/assign" wins over
// "/v1/shards/{id}"), falling back to the capture when the literal branch leads nowhere.
//
// Answers it gives itself, as JSON errors: 400 InvalidArgument for a malformed target or
// percent-escape, 404 NotFound for a path no route matches, 405 MethodNotAllowed (with an Allow
// header) for a path that only other methods match.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/logger.h"
#include "http/message.h"
#include "http/server.h"

namespace kshard::http {

class Router {
 public:
  // `logger` hears about handlers that throw (they are answered 500 by their Responder).
  explicit Router(std::optional<Logger> logger = std::nullopt);
  ~Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;

  // Registers a route. A later route with the same method and pattern replaces the earlier one.
  // `pattern` is code, not input: it must start with '/' and captures must be whole segments.
  void add(Method method, std::string_view pattern, Handler handler, RouteOptions options = {});

  // The body limit of the route that `method` and `target` reach, when that route has one of its
  // own (RouteOptions::maxBodyBytes); none for a route without one, a target no route takes, or
  // a malformed one (dispatch() answers those). Adapters ask it once a request's head is read,
  // before its body; only when hasBodyLimits(), so that servers without such routes pay nothing.
  std::optional<std::size_t> bodyLimit(Method method, std::string_view target) const;
  bool hasBodyLimits() const { return hasBodyLimits_; }

  // Fills request.query and request.params from request.target, then runs the
  // matching handler, or answers the routing error itself. Safe to call from many threads at once
  // once routes are added.
  void dispatch(Request request, Responder responder) const;

 private:
  struct Node;
  struct Match;
  // Finds the routes `path` (no query) reaches; false when a segment's percent-escape is malformed.
  bool match(std::string_view path, Match& out) const;

  std::unique_ptr<Node> root_;
  std::optional<Logger> logger_;
  bool hasBodyLimits_ = false;
};

// Splits "k=v&k2=v2" into decoded pairs ('+' is a space); the first of repeated keys wins. False on
// a malformed percent-escape.
bool parseQuery(std::string_view query, std::map<std::string, std::string>& out);

}  // namespace kshard::http
