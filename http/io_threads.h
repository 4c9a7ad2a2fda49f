// IoThreads: one set of I/O threads that several Beast servers and clients share, so that a proxy
// (the sidecar) receives a message, forwards it and answers on one thread, without handing it to
// another thread's pool on the way (each hand-off is a wake-up and a context switch).
//
// Two models:
//   kContextPerThread  every thread runs its own event loop. A server spreads its connections over
//                      the loops; a client started from one of the threads uses a connection of
//                      that thread's loop, so a forward and its answer stay on the thread that
//                      received the message. The way nginx's and Envoy's workers work. A loop's
//                      sockets are used from its thread only (the adapters post what another
//                      thread asks of them), so the loops run without Asio's per-socket locks.
//   kSharedContext     all threads run one event loop; any thread may run any connection's next
//                      step (each connection is serialised on its own strand).
//
// Give it to servers and clients through ServerOptions::ioThreads and ClientOptions::ioThreads
// (the cpprestsdk adapters ignore it). It must outlive every server and client given it, and
// streams and Responders of theirs: destroy it last. Its destructor stops the threads and must not
// run on one of them.
#pragma once

#include <memory>
#include <optional>

#include "base/logger.h"

namespace kshard::http {

struct IoThreadsOptions {
  enum class Model { kContextPerThread, kSharedContext };
  int threads = 2;  // at least 1
  Model model = Model::kContextPerThread;
  // Where a handler that threw is reported (the thread goes on). None: dropped silently.
  std::optional<Logger> logger;
};

class IoThreads {
 public:
  // Starts the threads.
  explicit IoThreads(IoThreadsOptions options);
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  // Stops the event loops (handlers not run yet are dropped) and joins the threads; idempotent.
  // Not from one of its threads.
  void stop();
  // True on one of this set's threads.
  bool runsInThisThread() const;
  int threads() const;

  // The Beast adapters' view of the event loops (http/internal/io_threads_impl.h).
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kshard::http
