// Frames of kshard channels (http/channel.h) as a sidecar reads them from another: request
// frames on the server side, response and goaway frames on the client side. The payloads come
// from another pod, so every byte is untrusted.
//
// Input: one byte choosing a request or a response payload, then the payload. Checks:
//   - a payload that parses holds only fields a message may carry (isWritableField, no framing
//     fields), and for a request a target that is an origin-form path without spaces or controls;
//   - encoding what was parsed and parsing it again gives the same message (fields, target,
//     method or status, body), and the encoded frame's head gives back the id and the length;
//   - parseHead on any 13 bytes accepts only the three types, with a length that covers the
//     head.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "http/channel.h"

namespace kshard::fuzz {
namespace {

using http::channel::FrameHead;
using http::channel::FrameType;

void checkFields(const http::Headers& headers, const std::string& input) {
  for (const auto& [name, value] : headers) {
    check(http::isWritableField(name, value), "accepted fields are writable", input);
    check(!http::isFramingHeader(name), "accepted fields hold no framing field", input);
  }
}

// The head of `frame` as parseHead reads it; checks it names `id`, `type` and the frame's size.
void checkHead(const std::string& frame, FrameType type, std::uint64_t id,
               const std::string& input) {
  FrameHead head;
  std::string error;
  check(frame.size() >= http::channel::kHeadBytes && http::channel::parseHead(frame, head, error),
        "an encoded frame's head parses", input + " | " + error);
  check(head.type == type && head.id == id &&
            head.payloadBytes + http::channel::kHeadBytes == frame.size(),
        "an encoded frame's head gives back its type, id and length", input);
}

}  // namespace

int fuzzOneChannelFrame(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const bool request = in.flag();
  const std::string payload(in.rest());
  const std::string input = (request ? "request: " : "response: ") + payload;

  // Any 13 bytes of it as a head.
  if (payload.size() >= http::channel::kHeadBytes) {
    FrameHead head;
    std::string error;
    if (http::channel::parseHead(payload, head, error)) {
      const auto type = static_cast<int>(head.type);
      check(type >= 1 && type <= 3, "a head that parses has a known type", input);
      check(head.type != FrameType::kGoaway || head.payloadBytes == 0,
            "a goaway that parses has no payload", input);
    } else {
      check(!error.empty(), "a refused head says why", input);
    }
  }

  std::string error;
  if (request) {
    http::Request r;
    if (!http::channel::parseRequest(payload, r, error)) {
      check(!error.empty(), "a refused request says why", input);
      return 0;
    }
    checkFields(r.headers, input);
    check(!r.target.empty() && r.target[0] == '/', "an accepted target is a path", input);
    for (char c : r.target) {
      const auto u = static_cast<unsigned char>(c);
      check(u > 0x20 && u != 0x7f, "an accepted target holds no space or control", input);
    }
    std::string frame;
    http::channel::appendRequest(frame, 7, r.method, r.target, r.headers, r.body);
    checkHead(frame, FrameType::kRequest, 7, input);
    http::Request again;
    check(http::channel::parseRequest(frame.substr(http::channel::kHeadBytes), again, error),
          "a request encoded from a parsed one parses", input + " | " + error);
    check(again.method == r.method && again.target == r.target &&
              again.headers.wire() == r.headers.wire() && again.body == r.body,
          "a request survives encoding and parsing unchanged", input);
    return 0;
  }
  http::Response r;
  if (!http::channel::parseResponse(payload, r, error)) {
    check(!error.empty(), "a refused response says why", input);
    return 0;
  }
  checkFields(r.headers, input);
  check(r.status >= 100 && r.status <= 999, "an accepted status is three digits", input);
  std::string frame;
  http::channel::appendResponse(frame, ~std::uint64_t{0}, r.status, r.headers, r.body);
  checkHead(frame, FrameType::kResponse, ~std::uint64_t{0}, input);
  http::Response again;
  check(http::channel::parseResponse(frame.substr(http::channel::kHeadBytes), again, error),
        "a response encoded from a parsed one parses", input + " | " + error);
  check(
      again.status == r.status && again.headers.wire() == r.headers.wire() && again.body == r.body,
      "a response survives encoding and parsing unchanged", input);
  return 0;
}

}  // namespace kshard::fuzz
