// Internal to the Boost.Beast adapter (beast_channel_session.cc, channel_client.cc): takes the
// frames of a kshard channel (http/channel.h) out of a connection's read buffer, for both ends.
// The server reads requests with it, the client answers; each decides from a frame's head whether
// to take the frame (and waits until it is whole) or to skip it, whose bytes are then discarded
// as they arrive and never held whole. Nothing is copied: a payload is a view of the buffer until
// the frame is consumed. Never include it from a public header.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/channel.h"
#include "http/internal/beast_stream.h"

namespace kshard::http::beast_detail {

class ChannelFrameReader {
 public:
  enum class Next {
    kNeedMore,   // the buffer holds no whole head yet (or the rest of a skipped frame): read
    kHead,       // `head` holds the next frame's head
    kMalformed,  // `error` says why: the channel is over
  };

  explicit ChannelFrameReader(beast::flat_buffer& buffer) : buffer_(buffer) {}
  ChannelFrameReader(const ChannelFrameReader&) = delete;
  ChannelFrameReader& operator=(const ChannelFrameReader&) = delete;

  // Discards what has arrived of a skipped frame; true once nothing is left to discard.
  bool discardSkipped() { return skipChannelBytes(buffer_, skip_); }
  // Parses the head of the next frame, after discarding what remains of a skipped one.
  Next next(channel::FrameHead& head, std::string& error) {
    if (!discardSkipped()) return Next::kNeedMore;
    const std::string_view data = view();
    if (data.size() < channel::kHeadBytes) return Next::kNeedMore;
    return channel::parseHead(data, head, error) ? Next::kHead : Next::kMalformed;
  }
  // The payload of the frame whose head next() gave, once all of it has been read.
  std::optional<std::string_view> payload(const channel::FrameHead& head) const {
    const std::string_view data = view();
    if (data.size() < frameBytes(head)) return std::nullopt;
    return data.substr(channel::kHeadBytes, head.payloadBytes);
  }
  // Drops the frame of `head`, whose payload has been read (payload() gave it) or is empty.
  void consume(const channel::FrameHead& head) { buffer_.consume(frameBytes(head)); }
  // Drops the frame of `head` unread: what has arrived now, the rest as it arrives.
  void skip(const channel::FrameHead& head) { skip_ = frameBytes(head); }
  // Bytes of a skipped frame still to come.
  bool skipping() const { return skip_ > 0; }
  // How much the next read asks for: a usual read, or the rest of a large frame coming in.
  std::size_t readSize() const { return channelReadSize(buffer_, skip_); }
  // Gives back the room a large frame took once the buffer is empty.
  void trim() { trimChannelBuffer(buffer_); }

  static std::size_t frameBytes(const channel::FrameHead& head) {
    return channel::kHeadBytes + head.payloadBytes;
  }

 private:
  std::string_view view() const {
    return {static_cast<const char*>(buffer_.data().data()), buffer_.size()};
  }

  beast::flat_buffer& buffer_;
  std::size_t skip_ = 0;  // bytes of a skipped frame still to discard
};

}  // namespace kshard::http::beast_detail
