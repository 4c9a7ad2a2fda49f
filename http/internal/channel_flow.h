// ChannelFlow: the bounds of one kshard channel (http/channel.h) on the server's side, as
// decisions without I/O. The Beast server's session asks it before taking each request frame and
// tells it what happened; it says when reading pauses and resumes, and which deadline the
// connection must keep.
//
// Why: a channel is accepted from any peer, before any token is seen. A peer that sends requests
// and never reads the answers made the server queue answers without end (and every frame moved
// the write's deadline away); one that sent a frame a byte at a time kept the connection open by
// resetting the idle timer with each byte. Now:
//  - reading stops while `maxInFlight` requests are dispatched and not answered, or while
//    `maxQueuedBytes` of answers wait to be written, and goes on once they are below both
//    (back-pressure: the peer's frames wait in the sockets' buffers, then in the peer);
//  - a write of answers must end within `timeout` of its start, whatever arrives meanwhile;
//  - a frame must arrive whole within `timeout` of the read that brought its first bytes;
//  - otherwise a channel with nothing in flight is idle and ends `timeout` after the last event;
//    one waiting for its handlers, with nothing to write, waits as long as they take (as plain
//    HTTP does).
// So a peer holds at most the bounds' worth of memory (plus the answers to what is in flight),
// for at most `timeout` after it stopped reading.
//
// Not thread-safe: used on the session's strand. Costs a few comparisons per frame.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace kshard::http {

class ChannelFlow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::time_point kNever = Clock::time_point::max();

  struct Bounds {
    std::size_t maxInFlight = 1024;
    std::size_t maxQueuedBytes = 4u << 20;
    Clock::duration timeout = std::chrono::seconds(30);
  };

  explicit ChannelFlow(Bounds bounds) : bounds_(bounds) {}

  std::size_t inFlight() const { return inFlight_; }
  bool paused() const { return paused_; }
  // The most bytes of answers that waited at once (for tests and diagnostics).
  std::size_t queuedHighWater() const { return highWater_; }

  // Before taking a request frame, with `queued` bytes of answers waiting: true when it may be
  // taken (taken() follows); false pauses reading until resume() allows it again.
  bool mayTake(std::size_t queued) {
    paused_ = overBounds(queued);
    return !paused_;
  }
  // A request was dispatched (or refused with an answer still to be queued).
  void taken() { ++inFlight_; }
  // An answer was queued, and `queued` bytes now wait. True when it was the last one in flight.
  bool answered(std::size_t queued) {
    highWater_ = std::max(highWater_, queued);
    return --inFlight_ == 0;
  }
  // True when reading was paused and may go on now, with `queued` bytes waiting; the pause ends.
  bool resume(std::size_t queued) {
    if (!paused_ || overBounds(queued)) return false;
    paused_ = false;
    return true;
  }

  void writeStarted(Clock::time_point now) { writeDeadline_ = now + bounds_.timeout; }
  void writeEnded() { writeDeadline_ = kNever; }
  bool writing() const { return writeDeadline_ != kNever; }

  // After the frames read so far were taken: `partial` when part of a frame is still to come.
  // Its deadline runs from the first read that left it incomplete. While reading is paused none
  // runs: what is left waits for the server, not for the peer.
  void afterRead(bool partial, Clock::time_point now) {
    if (!partial || paused_) {
      frameDeadline_ = kNever;
    } else if (frameDeadline_ == kNever) {
      frameDeadline_ = now + bounds_.timeout;
    }
  }

  // The deadline to keep after an event at `now`: the write's or the frame's, whichever comes
  // first; else, with nothing in flight, `now` + timeout (idle); else none (kNever).
  Clock::time_point deadline(Clock::time_point now) const {
    const Clock::time_point fixed = std::min(writeDeadline_, frameDeadline_);
    if (fixed != kNever || inFlight_ > 0) return fixed;
    return now + bounds_.timeout;
  }
  // Which deadline passed: true for the idle one (the channel ends politely, with goaway), false
  // for a write or a frame that took too long (the connection closes at once).
  bool idleExpired() const {
    return writeDeadline_ == kNever && frameDeadline_ == kNever && inFlight_ == 0;
  }

 private:
  bool overBounds(std::size_t queued) const {
    return inFlight_ >= bounds_.maxInFlight || queued >= bounds_.maxQueuedBytes;
  }

  const Bounds bounds_;
  std::size_t inFlight_ = 0;
  std::size_t highWater_ = 0;
  bool paused_ = false;
  Clock::time_point writeDeadline_ = kNever;
  Clock::time_point frameDeadline_ = kNever;
};

}  // namespace kshard::http
