// TLS setup shared by the adapters: loads kshard's TLS options into a Boost.Asio ssl::context (the
// type both Beast and cpprestsdk's asio backend use). Internal to http/; never include it from a
// public header.
#pragma once

#include <boost/asio/ssl/context.hpp>

#include "base/status.h"
#include "http/client.h"
#include "http/server.h"

namespace kshard::http {

// Loads the trust anchors (caData/caFile, replacing whatever the context trusted before, or the
// system store when neither is set) and the client certificate and key. Peer verification itself
// (mode, host name) is set per connection. An error names the file or item that failed.
Status configureClientTls(boost::asio::ssl::context& ctx, const TlsClientOptions& tls);

// Loads the serving certificate chain and key, and the client CA when clients must present a
// certificate. TLS 1.2 or newer only.
Status configureServerTls(boost::asio::ssl::context& ctx, const TlsServerOptions& tls);

}  // namespace kshard::http
