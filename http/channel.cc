#include "http/channel.h"

#include <cstring>

namespace kshard::http::channel {

namespace {

void putU16(char* at, std::uint16_t v) {
  at[0] = static_cast<char>(v >> 8);
  at[1] = static_cast<char>(v);
}

void putU32(char* at, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) at[i] = static_cast<char>(v);
}

void putU64(char* at, std::uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) at[i] = static_cast<char>(v);
}

std::uint64_t getUnsigned(const char* at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(at[i]);
  return v;
}

// Reserves a frame's head in `out` and returns where it starts; finishHead fills in its length.
std::size_t beginFrame(std::string& out, FrameType type, std::uint64_t id, std::size_t payload) {
  const std::size_t at = out.size();
  out.resize(at + kHeadBytes);
  out.reserve(at + kHeadBytes + payload);
  out[at + 4] = static_cast<char>(type);
  putU64(out.data() + at + 5, id);
  return at;
}

void finishHead(std::string& out, std::size_t at) {
  putU32(out.data() + at, static_cast<std::uint32_t>(out.size() - at - 4));
}

void appendU32(std::string& out, std::size_t v) {
  char b[4];
  putU32(b, static_cast<std::uint32_t>(v));
  out.append(b, 4);
}

// Reads the payload's parts in order; every read checks that the part is there.
class Reader {
 public:
  explicit Reader(std::string_view payload) : rest_(payload) {}

  bool unsignedOf(int bytes, std::uint64_t& v) {
    if (rest_.size() < static_cast<std::size_t>(bytes)) return false;
    v = getUnsigned(rest_.data(), bytes);
    rest_.remove_prefix(static_cast<std::size_t>(bytes));
    return true;
  }
  // A part given by its u32 length.
  bool part(std::string_view& v) {
    std::uint64_t n = 0;
    if (!unsignedOf(4, n) || n > rest_.size()) return false;
    v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return true;
  }
  std::string_view rest() const { return rest_; }

 private:
  std::string_view rest_;
};

// Takes `text` as fields when it is a run of well-formed "Name: value\r\n" lines without framing
// fields; otherwise says what is wrong.
bool parseFields(std::string_view text, Headers& out, std::string& error) {
  std::size_t count = 0;
  std::uint8_t known = 0;
  for (std::string_view rest = text; !rest.empty(); ++count) {
    const std::size_t lf = rest.find('\n');
    const std::size_t colon = rest.find(':');
    if (lf == std::string_view::npos || lf < 1 || rest[lf - 1] != '\r' || colon > lf ||
        colon + 1 >= lf || rest[colon + 1] != ' ') {
      error = "field " + std::to_string(count + 1) + " is not one \"Name: value\" line";
      return false;
    }
    const std::string_view name = rest.substr(0, colon);
    const std::string_view value = rest.substr(colon + 2, lf - 1 - (colon + 2));
    if (!isWritableField(name, value)) {
      error = "field " + std::to_string(count + 1) + " has a character no field may hold";
      return false;
    }
    known |= Headers::knownBit(name);
    rest.remove_prefix(lf + 1);
  }
  if ((known & Headers::kFraming) != 0) {
    error = "a frame's fields hold no Content-Length or Transfer-Encoding";
    return false;
  }
  out.clear();
  out.appendWire(text, count, known);
  return true;
}

}  // namespace

bool parseHead(std::string_view bytes, FrameHead& head, std::string& error) {
  const std::uint64_t length = getUnsigned(bytes.data(), 4);
  const auto type = static_cast<unsigned char>(bytes[4]);
  if (type < 1 || type > 3) {
    error = "unknown frame type " + std::to_string(type);
    return false;
  }
  if (length < kHeadBytes - 4) {
    error = "frame length " + std::to_string(length) + " is shorter than its head";
    return false;
  }
  head.type = static_cast<FrameType>(type);
  head.id = getUnsigned(bytes.data() + 5, 8);
  head.payloadBytes = static_cast<std::size_t>(length - (kHeadBytes - 4));
  if (head.type == FrameType::kGoaway && head.payloadBytes != 0) {
    error = "a goaway frame has no payload";
    return false;
  }
  return true;
}

void appendRequest(std::string& out, std::uint64_t id, Method method, std::string_view target,
                   const Headers& fields, std::string_view body) {
  const std::string_view text = fields.wire();
  const std::size_t at =
      beginFrame(out, FrameType::kRequest, id, 9 + target.size() + text.size() + body.size());
  out.push_back(static_cast<char>(method));
  appendU32(out, target.size());
  out.append(target);
  appendU32(out, text.size());
  out.append(text);
  out.append(body);
  finishHead(out, at);
}

void appendResponse(std::string& out, std::uint64_t id, int status, const Headers& fields,
                    std::string_view body) {
  const std::string_view text = fields.wire();
  const std::size_t at = beginFrame(out, FrameType::kResponse, id, 6 + text.size() + body.size());
  char s[2];
  putU16(s, static_cast<std::uint16_t>(status));
  out.append(s, 2);
  appendU32(out, text.size());
  out.append(text);
  out.append(body);
  finishHead(out, at);
}

void appendGoaway(std::string& out, std::uint64_t lastId) {
  finishHead(out, beginFrame(out, FrameType::kGoaway, lastId, 0));
}

bool parseRequest(std::string_view payload, Request& out, std::string& error) {
  Reader r(payload);
  std::uint64_t method = 0;
  std::string_view target;
  std::string_view fields;
  if (!r.unsignedOf(1, method) || !r.part(target) || !r.part(fields)) {
    error = "request frame ends inside its head";
    return false;
  }
  if (method > static_cast<std::uint64_t>(Method::kTrace)) {
    error = "unknown method " + std::to_string(method);
    return false;
  }
  if (target.size() + fields.size() > kMaxFieldsBytes) {
    error = "target and fields exceed " + std::to_string(kMaxFieldsBytes) + " bytes";
    return false;
  }
  if (target.empty() || target[0] != '/') {
    error = "the target is not a path";
    return false;
  }
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      error = "the target holds a space or control character";
      return false;
    }
  }
  if (!parseFields(fields, out.headers, error)) return false;
  out.method = static_cast<Method>(method);
  out.target.assign(target);
  out.body.assign(r.rest());
  return true;
}

bool parseResponse(std::string_view payload, Response& out, std::string& error) {
  Reader r(payload);
  std::uint64_t status = 0;
  std::string_view fields;
  if (!r.unsignedOf(2, status) || !r.part(fields)) {
    error = "response frame ends inside its head";
    return false;
  }
  if (status < 100 || status > 999) {
    error = "status " + std::to_string(status) + " is out of range";
    return false;
  }
  if (fields.size() > kMaxFieldsBytes) {
    error = "fields exceed " + std::to_string(kMaxFieldsBytes) + " bytes";
    return false;
  }
  if (!parseFields(fields, out.headers, error)) return false;
  out.status = static_cast<int>(status);
  out.body.assign(r.rest());
  return true;
}

}  // namespace kshard::http::channel
