// ChannelClient: the http::Client over kshard channels (http/channel.h), for one origin that
// many requests go to at once (a sidecar forwarding to its peers).
//
// Each loop of the I/O threads keeps one channel, one connection, to the origin. A request sent
// from a loop's thread goes on that loop's channel; every request that is ready when the loop
// comes round goes out in one write, and the answers to a burst come back in few reads, in any
// order. Plain HTTP pays a write, a read and a wait per request on each side instead.
//
// A channel opens on first use and closes after idleTimeout without requests. While it opens,
// requests wait for it (within their deadline and connectTimeout). The upgrade request carries
// ClientOptions::channelAuthorization. An answer 503 (a server that stops) fails the requests
// that waited as not sent (Unavailable); 401 or 403 (a server that did not admit the caller)
// sends them as plain HTTP, to get the server's own answer. Either way a later request tries a
// channel again. When the origin answers the upgrade with anything else but 101 (an older
// server), or the origin is https or a host name, the client sends every request as plain HTTP
// (a BeastClient with the same options) from then on.
// Streams (openStream) always go as plain HTTP.
//
// Errors, as the Beast client's: Unavailable when no connection could be made or the request was
// not sent, or when the connection broke before the answer; DeadlineExceeded when the answer did
// not come in time (a late answer is dropped); ResourceExhausted for a response body over
// maxResponseBytes (the channel goes on). A request after the last one a closing server took (its
// goaway) fails Unavailable: it was not processed, and may be sent again.
//
// Destroying the client fails what is in flight with Cancelled and returns once those callbacks
// ran (except on one of the client's I/O threads, which must go on to run them).
#pragma once

#include <memory>

#include "http/client.h"

namespace kshard::http {

// InvalidArgument for a malformed baseUrl or unreadable TLS material.
StatusOr<std::unique_ptr<Client>> makeChannelClient(ClientOptions options);

}  // namespace kshard::http
