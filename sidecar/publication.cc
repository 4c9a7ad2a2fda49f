#include "sidecar/publication.h"

#include <nlohmann/json.hpp>

#include "base/utf8.h"
#include "protocol/wire.h"
#include "sidecar/entity_request.h"
#include "sidecar/sidecar_error.h"

namespace kshard::sidecar {

namespace errors = protocol::errors;
using nlohmann::json;

namespace {

// The status a receiving sidecar answers a refusal with.
int refusalStatus(std::string_view code) {
  if (code == errors::kDraining || code == errors::kLeaseFenced) return 503;
  if (code == errors::kBadRequest) return 400;
  return 502;  // the app's part: AppUnavailable, AppRefused, OutcomeUnknown
}

// A count from an answer's body: a non-negative integer, else 0.
std::size_t countIn(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || !it->is_number_unsigned()) return 0;
  return it->get<std::size_t>();
}

}  // namespace

PodReceipt PodReceipt::refused(std::string_view code, std::string message) {
  PodReceipt r;
  r.code = std::string(code);
  r.message = std::move(message);
  return r;
}

Status validateTopic(std::string_view topic) {
  if (topic.empty()) return invalidArgument("topic: must not be empty");
  if (topic.size() > kMaxEntityTypeBytes) {
    return invalidArgument("topic: longer than " + std::to_string(kMaxEntityTypeBytes) + " bytes");
  }
  // "." and ".." would be dot-segments of the callback's path, which some app frameworks
  // resolve (/kshard/topics/.. is /kshard/): they name no topic.
  if (topic == "." || topic == "..") return invalidArgument("topic: must not be . or ..");
  if (Status s = validateUtf8(topic); !s.ok()) return s.withContext("topic");
  for (const char c : topic) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return invalidArgument("topic: contains a control character");
  }
  return {};
}

std::string topicPath(std::string_view prefix, const Publication& publication) {
  std::string path(prefix);
  http::appendPercentEncoded(path, publication.topic);
  if (publication.entityType) {
    path += "?entities=";
    http::appendPercentEncoded(path, *publication.entityType);
  }
  return path;
}

http::Response receiptAnswer(const PodReceipt& receipt, std::string_view pod) {
  if (!receipt.accepted) {
    return sidecarError(refusalStatus(receipt.code), receipt.code, receipt.message);
  }
  return http::Response::json(200, json{{"pod", pod},
                                        {"entities", receipt.entities},
                                        {"entitiesRefused", receipt.entitiesRefused}}
                                       .dump());
}

PodReceipt receiptOfAnswer(const http::Response& answer) {
  const json body = json::parse(answer.body, nullptr, false);
  if (answer.status >= 200 && answer.status < 300) {
    PodReceipt r;
    r.accepted = true;
    if (body.is_object()) {
      r.entities = countIn(body, "entities");
      r.entitiesRefused = countIn(body, "entitiesRefused");
    }
    return r;
  }
  // The sidecar's own error code; a peer that does not know topics (an older release) answers
  // the router's 404 NotFound, whose code is in the body only.
  std::string code(answer.headers.get(protocol::kErrorHeader).value_or(""));
  std::string message = "answered " + std::to_string(answer.status);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const json& error = body["error"];
    if (const auto c = error.find("code"); code.empty() && c != error.end() && c->is_string()) {
      code = c->get<std::string>();
    }
    if (const auto m = error.find("message"); m != error.end() && m->is_string()) {
      message += ": " + m->get<std::string>();
    }
  }
  if (code.empty()) code = "HTTP" + std::to_string(answer.status);
  return PodReceipt::refused(code, std::move(message));
}

}  // namespace kshard::sidecar
