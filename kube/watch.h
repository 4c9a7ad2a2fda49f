// Watch streams: the framing of a Kubernetes watch response (one JSON object per line,
// {"type": "ADDED", "object": {...}}, where a line may arrive split across any number of reads)
// and a blocking reader over an http::ResponseStream.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "http/client.h"

namespace kshard::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };
std::string_view watchEventTypeName(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // The object; for kError a metav1.Status; for kBookmark an object with only
  // metadata.resourceVersion set.
  nlohmann::json object;
};

// The Status of an ERROR event (code 410 -> kGone: the watch's resourceVersion is too old).
Status watchErrorStatus(const WatchEvent& event);

// Splits a byte stream into watch events. Not thread-safe.
class WatchDecoder {
 public:
  static constexpr std::size_t kDefaultMaxLineBytes = 16u << 20;
  explicit WatchDecoder(std::size_t maxLineBytes = kDefaultMaxLineBytes)
      : maxLineBytes_(maxLineBytes) {}

  // Appends `bytes` and moves every completed event to `out`, in order. A malformed line (not
  // JSON, unknown type, no object) or a line longer than the limit is an error; the decoder is
  // then unusable.
  Status feed(std::string_view bytes, std::vector<WatchEvent>& out);
  // Bytes of an unfinished line are buffered: a stream ending here was cut inside an event.
  bool partial() const;

 private:
  Status decodeLine(std::string_view line, std::vector<WatchEvent>& out);

  std::size_t maxLineBytes_;
  std::string buffer_;
  Status failed_;
};

// One open watch. next() is for one reader thread; cancel() may be called from any thread.
class WatchStream {
 public:
  WatchStream(std::unique_ptr<http::ResponseStream> stream, std::string description,
              std::size_t maxLineBytes = WatchDecoder::kDefaultMaxLineBytes);

  // The next event. nullopt: the server ended the watch cleanly (its timeoutSeconds passed).
  // Errors: Unavailable when the stream broke (also when it ended inside an event),
  // DeadlineExceeded when nothing arrived within `timeout` (the stream stays usable), Cancelled
  // after cancel(), InvalidArgument on a malformed event.
  StatusOr<std::optional<WatchEvent>> next(std::chrono::milliseconds timeout);
  void cancel();

 private:
  std::unique_ptr<http::ResponseStream> stream_;
  std::string description_;
  WatchDecoder decoder_;
  std::vector<WatchEvent> ready_;
  std::size_t nextReady_ = 0;
  Status pendingError_;
  bool ended_ = false;
};

}  // namespace kshard::kube
