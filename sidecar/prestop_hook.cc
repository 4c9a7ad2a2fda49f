#include "sidecar/prestop_hook.h"

#include <nlohmann/json.hpp>

#include "http/factory.h"

namespace kshard::sidecar {

using nlohmann::json;

namespace {

// The longest sleep hook taken: the kubelet's grace period bounds every hook anyway.
constexpr std::int64_t kMaxSleepSeconds = 3600;

StatusOr<PreStopHook::Get> parseGet(const json& get) {
  PreStopHook::Get out;
  const auto port = get.find("port");
  if (port == get.end() || !port->is_number_integer() || port->get<std::int64_t>() < 1 ||
      port->get<std::int64_t>() > 65535) {
    return invalidArgument("httpGet.port: must be a port number");
  }
  out.port = port->get<std::int64_t>();
  if (auto p = get.find("path"); p != get.end()) {
    if (!p->is_string()) return invalidArgument("httpGet.path: must be a string");
    out.path = p->get<std::string>();
    if (out.path.empty() || out.path[0] != '/') out.path = "/" + out.path;
  }
  if (auto h = get.find("host"); h != get.end()) {
    if (!h->is_string()) return invalidArgument("httpGet.host: must be a string");
    out.host = h->get<std::string>();
  }
  if (auto s = get.find("scheme"); s != get.end()) {
    if (!s->is_string() || (*s != "HTTP" && *s != "HTTPS")) {
      return invalidArgument("httpGet.scheme: must be HTTP or HTTPS");
    }
    out.https = *s == "HTTPS";
  }
  if (auto hs = get.find("httpHeaders"); hs != get.end()) {
    if (!hs->is_array()) return invalidArgument("httpGet.httpHeaders: must be a list");
    for (const auto& h : *hs) {
      if (!h.is_object() || !h.value("name", json()).is_string() ||
          !h.value("value", json()).is_string()) {
        return invalidArgument("httpGet.httpHeaders: each needs a name and a value");
      }
      out.headers.emplace_back(h["name"].get<std::string>(), h["value"].get<std::string>());
    }
  }
  return out;
}

}  // namespace

StatusOr<PreStopHook> PreStopHook::parse(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return invalidArgument("the app's preStop hook is not a JSON object");
  PreStopHook hook;
  if (auto get = j.find("httpGet"); get != j.end() && get->is_object()) {
    auto parsed = parseGet(*get);
    if (!parsed.ok()) return parsed.status();
    hook.get_ = std::move(*parsed);
    return hook;
  }
  if (auto sleep = j.find("sleep"); sleep != j.end() && sleep->is_object()) {
    const auto seconds = sleep->find("seconds");
    if (seconds == sleep->end() || !seconds->is_number_integer() ||
        seconds->get<std::int64_t>() < 0 || seconds->get<std::int64_t>() > kMaxSleepSeconds) {
      return invalidArgument("sleep.seconds: must be 0.." + std::to_string(kMaxSleepSeconds));
    }
    hook.sleep_ = std::chrono::seconds(seconds->get<std::int64_t>());
    return hook;
  }
  return invalidArgument("the app's preStop hook must be an httpGet or a sleep");
}

void PreStopHook::run(const std::string& podIp, Scheduler& scheduler, Duration timeout,
                      std::function<void(Status)> done) {
  if (!get_) {
    scheduler.runAfter(sleep_, [done = std::move(done)] { done({}); });
    return;
  }
  if (client_ == nullptr) {
    const std::string host = get_->host.empty() ? podIp : get_->host;
    const bool v6 = host.find(':') != std::string::npos;
    http::ClientOptions options;
    options.baseUrl = std::string(get_->https ? "https://" : "http://") + (v6 ? "[" : "") + host +
                      (v6 ? "]" : "") + ":" + std::to_string(get_->port);
    // As the kubelet: an HTTPS hook does not verify the app's certificate.
    options.tls.insecureSkipVerify = true;
    options.userAgent = "kshard-sidecar";
    auto client = http::makeClient(http::Backend::kBeast, std::move(options));
    if (!client.ok()) {
      done(client.status());
      return;
    }
    client_ = std::move(*client);
  }
  http::Request request;
  request.method = http::Method::kGet;
  request.target = get_->path;
  request.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  for (const auto& [name, value] : get_->headers) request.headers.add(name, value);
  client_->send(std::move(request), [done = std::move(done)](StatusOr<http::Response> r) {
    done(r.ok() ? Status{} : r.status());
  });
}

}  // namespace kshard::sidecar
