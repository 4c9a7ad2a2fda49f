#include "kube/watch.h"

#include <utility>

#include "base/enum_names.h"
#include "kube/api_error.h"

namespace kshard::kube {

std::string_view watchEventTypeName(WatchEventType type) {
  constexpr std::pair<WatchEventType, std::string_view> kNames[] = {
      {WatchEventType::kAdded, "ADDED"},
      {WatchEventType::kModified, "MODIFIED"},
      {WatchEventType::kDeleted, "DELETED"},
      {WatchEventType::kBookmark, "BOOKMARK"},
      {WatchEventType::kError, "ERROR"}};
  return nameIn(kNames, type, "UNKNOWN");
}

Status watchErrorStatus(const WatchEvent& event) {
  return apiErrorFromStatus(event.object, 500).toStatus("watch ERROR event");
}

Status WatchDecoder::decodeLine(std::string_view line, std::vector<WatchEvent>& out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return {};
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return invalidArgument("watch stream: a line is not a JSON object: " +
                           std::string(line.substr(0, 120)));
  }
  auto type = j.find("type");
  auto object = j.find("object");
  if (type == j.end() || !type->is_string() || object == j.end() || !object->is_object()) {
    return invalidArgument("watch stream: event without type or object: " +
                           std::string(line.substr(0, 120)));
  }
  const std::string& t = type->get_ref<const std::string&>();
  WatchEvent ev;
  if (t == "ADDED") {
    ev.type = WatchEventType::kAdded;
  } else if (t == "MODIFIED") {
    ev.type = WatchEventType::kModified;
  } else if (t == "DELETED") {
    ev.type = WatchEventType::kDeleted;
  } else if (t == "BOOKMARK") {
    ev.type = WatchEventType::kBookmark;
  } else if (t == "ERROR") {
    ev.type = WatchEventType::kError;
  } else {
    return invalidArgument("watch stream: unknown event type \"" + t + "\"");
  }
  ev.object = std::move(*object);
  out.push_back(std::move(ev));
  return {};
}

Status WatchDecoder::feed(std::string_view bytes, std::vector<WatchEvent>& out) {
  if (!failed_.ok()) return failed_;
  std::size_t start = 0;
  for (;;) {
    const auto nl = bytes.find('\n', start);
    if (nl == std::string_view::npos) break;
    Status s;
    if (buffer_.empty()) {
      s = decodeLine(bytes.substr(start, nl - start), out);
    } else {
      buffer_.append(bytes.substr(start, nl - start));
      s = decodeLine(buffer_, out);
      buffer_.clear();
    }
    if (!s.ok()) {
      failed_ = s;
      return s;
    }
    start = nl + 1;
  }
  buffer_.append(bytes.substr(start));
  if (buffer_.size() > maxLineBytes_) {
    failed_ = Status(StatusCode::kResourceExhausted, "watch stream: an event is longer than " +
                                                         std::to_string(maxLineBytes_) + " bytes");
    return failed_;
  }
  return {};
}

bool WatchDecoder::partial() const {
  return buffer_.find_first_not_of(" \t\r") != std::string::npos;
}

WatchStream::WatchStream(std::unique_ptr<http::ResponseStream> stream, std::string description,
                         std::size_t maxLineBytes)
    : stream_(std::move(stream)), description_(std::move(description)), decoder_(maxLineBytes) {}

StatusOr<std::optional<WatchEvent>> WatchStream::next(std::chrono::milliseconds timeout) {
  for (;;) {
    if (nextReady_ < ready_.size()) {
      WatchEvent ev = std::move(ready_[nextReady_++]);
      if (nextReady_ == ready_.size()) {
        ready_.clear();
        nextReady_ = 0;
      }
      return std::optional<WatchEvent>(std::move(ev));
    }
    if (!pendingError_.ok()) return pendingError_;
    if (ended_) return std::optional<WatchEvent>();
    auto chunk = stream_->read(timeout);
    if (!chunk.ok()) {
      const Status& s = chunk.status();
      if (s.code() == StatusCode::kDeadlineExceeded || s.code() == StatusCode::kCancelled) {
        return s.withContext(description_);
      }
      return Status(StatusCode::kUnavailable, description_ + ": stream broke: " + s.message());
    }
    if (chunk->empty()) {
      ended_ = true;
      if (decoder_.partial()) {
        return unavailable(description_ + ": stream ended in the middle of an event");
      }
      continue;
    }
    // Events decoded before a malformed line are still delivered, then the error.
    if (Status s = decoder_.feed(*chunk, ready_); !s.ok())
      pendingError_ = s.withContext(description_);
  }
}

void WatchStream::cancel() { stream_->cancel(); }

}  // namespace kshard::kube
