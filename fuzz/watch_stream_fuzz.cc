// The framing of Kubernetes watch responses (kube/watch.h): one JSON event per line, where the
// network may cut the stream anywhere. The fuzzer picks the bytes and the cut points.
//
// Checks: feeding the stream in pieces gives the same events (types and objects), the same
// failure and the same partial-line state as feeding it at once; ERROR events turn into a non-OK
// Status. With a small line limit, lines longer than the limit may fail only the piecewise feed
// (the limit bounds what is buffered between reads; a line that arrives whole is already in
// memory), so there the check is that a piecewise success implies the same result at once.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/fuzz_targets.h"
#include "kube/watch.h"

namespace kshard::fuzz {
namespace {

struct Outcome {
  Status status;
  std::vector<kube::WatchEvent> events;
  bool partial = false;
};

Outcome feedPieces(std::string_view stream, const std::vector<std::size_t>& cuts,
                   std::size_t maxLine) {
  kube::WatchDecoder decoder(maxLine);
  Outcome out;
  std::size_t at = 0;
  for (const std::size_t cut : cuts) {
    out.status = decoder.feed(stream.substr(at, cut - at), out.events);
    at = cut;
    if (!out.status.ok()) return out;
  }
  out.status = decoder.feed(stream.substr(at), out.events);
  out.partial = decoder.partial();
  // A failed decoder stays failed.
  if (!out.status.ok()) {
    std::vector<kube::WatchEvent> more;
    check(!decoder.feed("{\"type\":\"ADDED\",\"object\":{}}\n", more).ok() && more.empty(),
          "a failed decoder stays failed");
  }
  return out;
}

bool sameEvents(const std::vector<kube::WatchEvent>& a, const std::vector<kube::WatchEvent>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const kube::WatchEvent& x, const kube::WatchEvent& y) {
                      return x.type == y.type && x.object == y.object;
                    });
}

std::size_t longestLine(std::string_view s) {
  std::size_t longest = 0;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size();
    longest = std::max(longest, nl - start);
    start = nl + 1;
  }
  return longest;
}

}  // namespace

int fuzzOneWatchStream(const std::uint8_t* data, std::size_t size) {
  FuzzInput in(data, size);
  const std::size_t maxLine = in.flag() ? kube::WatchDecoder::kDefaultMaxLineBytes
                                        : static_cast<std::size_t>(in.inRange(1, 256));
  const std::size_t cutCount = static_cast<std::size_t>(in.inRange(0, 8));
  std::vector<std::size_t> cutSeeds;
  for (std::size_t i = 0; i < cutCount; ++i) cutSeeds.push_back(static_cast<std::size_t>(in.inRange(0, 0xFFFF)));
  const std::string_view stream = in.rest();
  std::vector<std::size_t> cuts;
  for (const std::size_t seed : cutSeeds) cuts.push_back(stream.empty() ? 0 : seed % (stream.size() + 1));
  std::sort(cuts.begin(), cuts.end());

  const Outcome whole = feedPieces(stream, {}, maxLine);
  const Outcome pieces = feedPieces(stream, cuts, maxLine);
  for (const kube::WatchEvent& e : whole.events) {
    check(e.object.is_object(), "every event carries an object");
    if (e.type == kube::WatchEventType::kError) {
      check(!kube::watchErrorStatus(e).ok(), "an ERROR event is a failed Status");
    }
  }
  if (longestLine(stream) <= maxLine) {
    check(whole.status.ok() == pieces.status.ok(), "cut points do not change success",
          std::string(stream));
    check(sameEvents(whole.events, pieces.events), "cut points do not change the events",
          std::string(stream));
    if (whole.status.ok()) {
      check(whole.partial == pieces.partial, "cut points do not change the partial state",
            std::string(stream));
    }
  } else if (pieces.status.ok()) {
    check(whole.status.ok() && sameEvents(whole.events, pieces.events),
          "what decodes in pieces decodes the same at once", std::string(stream));
  }
  if (!whole.status.ok()) check(!whole.status.message().empty(), "a failure says why");
  return 0;
}

}  // namespace kshard::fuzz
