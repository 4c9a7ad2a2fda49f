// BeastServer: the http::Server on Boost.Beast/Asio, for the data path (the sidecar's app and peer
// APIs), where throughput and latency matter.
//
// `threads` I/O threads of its own share one io_context; each connection runs on its own strand, so
// handlers of one connection never run concurrently while different connections use every thread.
// Given ServerOptions::ioThreads instead, it runs on that shared set, spreading its connections
// over its loops (see io_threads.h).
// Connections are kept alive; pipelined requests are answered in order because the next request
// is only read once the previous response was written (its bytes wait in the read buffer).
// Timeouts: `requestTimeout` bounds reading one request (408 when a request was started, a silent
// close when an idle keep-alive connection expires), the TLS handshake and each write. Bodies over
// `maxBodyBytes`, or over their route's RouteOptions::maxBodyBytes, get 413 (from Content-Length
// before the body is read, or while reading chunks) and the connection is closed. "Expect:
// 100-continue" is honoured. Streaming responses are supported (Responder::startStream).
// Connections beyond `maxConnections` or `maxConnectionsPerPeer` are closed once accepted.
//
// On a channel, each frame must arrive within `requestTimeout` of its first byte, each write
// of answers must finish within it (frames that arrive meanwhile do not move that deadline), and
// reading stops while `maxChannelRequestsInFlight` requests or `maxChannelQueuedBytes` of
// answers are waiting, until the answers have gone out: a peer that sends and never reads holds
// a bounded amount of the server's memory, for at most `requestTimeout` past its last read.
// stop(grace) sends each channel goaway and waits, within `grace`, for the answers to what the
// channel took and for its client to close it: a request the client sent meanwhile is one the
// goaway names as not taken, never one cut without a word.
#pragma once

#include <cstdint>

#include "http/server_adapter.h"

namespace kshard::http {

class BeastServer : public ServerAdapter {
 public:
  explicit BeastServer(ServerOptions options);
  ~BeastServer() override;

  Status start() override;
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0)) override;

  // Connections accepted since start, those open now, and those closed at once for being over
  // maxConnections or maxConnectionsPerPeer (for tests and diagnostics).
  std::uint64_t connectionsAccepted() const;
  std::size_t openConnections() const;
  std::uint64_t connectionsRefused() const;
  // The most bytes of answers that one channel kept waiting, among the channels closed so far.
  std::size_t channelQueuedBytesHighWater() const;

  struct Core;
};

}  // namespace kshard::http
