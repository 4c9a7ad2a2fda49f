// The kshard channel: many HTTP exchanges on one connection, in frames, answers in any order.
//
// A client asks for it on an ordinary HTTP/1.1 connection, as WebSocket and h2c do:
//
//   GET /v1/channel HTTP/1.1            HTTP/1.1 101 Switching Protocols
//   Connection: Upgrade                 Connection: Upgrade
//   Upgrade: kshard-channel/1           Upgrade: kshard-channel/1
//
// After the 101 both sides send frames. A server that does not speak it answers anything else (a
// 404 from an older kshard), and the client goes on with plain HTTP on new connections.
//
// Every frame is a fixed head of 13 bytes, then its payload (integers big-endian):
//
//   u32 length of what follows the length field (type, id and payload)
//   u8  type: 1 request, 2 response, 3 goaway
//   u64 id: the request's, chosen by the client, increasing; a response carries its request's
//   request  payload: u8 method, u32 target length, target, u32 fields length, fields, body
//   response payload: u16 status, u32 fields length, fields, body
//   goaway   no payload; id: the last request the server read and will answer
//
// Fields are in HTTP's wire form, one "Name: value\r\n" line each (http::Headers::wire), without
// framing fields (the frame's length gives the body's). A request is handled as if it had come
// in plain HTTP on that connection: same routes, same limits, same answers.
//
// A server sends goaway when it stops (or closes an idle channel): it reads no request after the
// one named, answers those it read, then closes. The client fails the requests after that id as
// not sent (Unavailable), so a caller may send them elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/message.h"

namespace kshard::http::channel {

inline constexpr std::string_view kPath = "/v1/channel";
inline constexpr std::string_view kProtocol = "kshard-channel/1";

inline constexpr std::size_t kHeadBytes = 13;  // length, type, id
// The most that a request's target and fields, or a response's fields, may take together: as
// the HTTP adapters' header limit.
inline constexpr std::size_t kMaxFieldsBytes = 64 * 1024;

enum class FrameType : std::uint8_t { kRequest = 1, kResponse = 2, kGoaway = 3 };

// The head of a frame: enough to know its size and whom it is for before its payload arrived.
struct FrameHead {
  FrameType type = FrameType::kRequest;
  std::uint64_t id = 0;
  std::size_t payloadBytes = 0;  // after the head
};

// The size of the frame that starts `bytes` (its head and payload), from its first 4 bytes.
inline std::size_t frameBytes(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  return 4 + ((std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) | (std::size_t{p[2]} << 8) |
              std::size_t{p[3]});
}

// Reads a head from the first kHeadBytes of `bytes`. False (with `error` set) for one no
// conforming peer sends: an unknown type, or a length shorter than type and id.
bool parseHead(std::string_view bytes, FrameHead& head, std::string& error);

// Appends a frame to `out`. The target and fields must be writable as they are (a Request's and
// a Headers' always are); the body is copied.
void appendRequest(std::string& out, std::uint64_t id, Method method, std::string_view target,
                   const Headers& fields, std::string_view body);
void appendResponse(std::string& out, std::uint64_t id, int status, const Headers& fields,
                    std::string_view body);
void appendGoaway(std::string& out, std::uint64_t lastId);

// Decodes a request or response payload (what follows the head). False, with `error` naming the
// problem, for one that is malformed: lengths past its end, a method or status out of range, a
// field that is not one well-formed line, a target that is not an origin-form path. `bodyLimit`
// bounds the body (the caller answers 413 or fails the request with ResourceExhausted itself
// when the head already says so; this is the check of what the payload holds).
bool parseRequest(std::string_view payload, Request& out, std::string& error);
bool parseResponse(std::string_view payload, Response& out, std::string& error);

// The body size that a payload of `payloadBytes` carries at least, for a check against a limit
// from the head alone: the payload less the most its other parts can take.
inline std::size_t minBodyBytes(std::size_t payloadBytes) {
  constexpr std::size_t kMostBesideBody = 1 + 4 + 4 + kMaxFieldsBytes;
  return payloadBytes > kMostBesideBody ? payloadBytes - kMostBesideBody : 0;
}

}  // namespace kshard::http::channel
