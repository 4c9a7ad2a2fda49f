// BeastClient's pool of connections (BeastClientCore): idle connections per loop, their wait
// for readability, connecting with TLS, and the errors of the transport as kshard's Status.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <utility>

#include "base/enum_names.h"
#include "http/internal/beast_client_core.h"
#include "http/internal/beast_message.h"

namespace kshard::http {

namespace beast_detail {

namespace {

namespace bhttp = boost::beast::http;

constexpr std::pair<Phase, std::string_view> kPhaseTexts[] = {
    {Phase::kConnect, "connecting"},
    {Phase::kHandshake, "TLS handshake"},
    {Phase::kWrite, "sending the request"},
    {Phase::kRead, "reading the response"}};

std::string_view phaseText(Phase p) { return nameIn(kPhaseTexts, p, ""); }

bool isTlsError(const beast::error_code& ec) {
  return ec.category() == net::error::get_ssl_category() ||
         ec.category() == ssl::error::get_stream_category();
}

// True when a pooled TLS connection still looks usable: no FIN or stray bytes from the server.
// (A plain connection's wait for readability tells its pool the same when it happens, so a plain
// one needs no check per reuse.)
bool looksAlive(Conn& conn) {
  if (!conn.stream.isTls()) return true;
  char byte = 0;
  const ssize_t n = ::recv(conn.stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
  // Pending bytes can be a session ticket. Zero is an orderly close.
  return n > 0;
}

}  // namespace

void closeOnStrand(const std::shared_ptr<Conn>& conn) {
  net::post(conn->exec, [conn] { conn->stream.close(); });
}

}  // namespace beast_detail

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary

std::shared_ptr<Conn> BeastClientCore::takeIdle(std::size_t loop, bool anyLoop) {
  const auto now = Clock::now();
  const std::size_t lists = anyLoop ? loops.size() : 1;
  for (std::size_t i = 0; i < lists; ++i) {
    Loop& l = *loops[(loop + i) % loops.size()];
    std::lock_guard<std::mutex> lock(l.mu);
    std::vector<Idle>& list = l.idle;
    while (!list.empty()) {
      Idle entry = std::move(list.back());
      list.pop_back();
      if (now - entry.since > options.idleTimeout || !looksAlive(*entry.conn)) {
        closeOnStrand(entry.conn);
        continue;
      }
      entry.conn->reused = true;
      return std::move(entry.conn);
    }
  }
  return nullptr;
}

void BeastClientCore::putIdle(std::shared_ptr<Conn> conn) {
  Loop& l = *loops[conn->loop];
  std::lock_guard<std::mutex> lock(l.mu);
  std::vector<Idle>& list = l.idle;
  if (l.closing || list.size() >= options.maxConnections) {
    closeOnStrand(conn);
    return;
  }
  list.push_back(Idle{std::move(conn), Clock::now()});
}

void BeastClientCore::dropIdle(const std::shared_ptr<Conn>& conn) {
  {
    Loop& l = *loops[conn->loop];
    std::lock_guard<std::mutex> lock(l.mu);
    auto it = std::find_if(l.idle.begin(), l.idle.end(),
                           [&conn](const Idle& entry) { return entry.conn == conn; });
    if (it == l.idle.end()) return;  // taken by an exchange, which sees Conn::readable
    l.idle.erase(it);
  }
  conn->stream.close();
}

void BeastClientCore::watch(const std::shared_ptr<Conn>& conn) {
  if (conn->watching || conn->stream.isTls()) return;
  conn->watching = true;
  auto fired = [conn](const beast::error_code&) {
    // Whatever came (bytes, a close, an error), the next read reports it.
    conn->watching = false;
    conn->readable = true;
    if (conn->onReadable) {
      UniqueFunction<void()> notify = std::move(conn->onReadable);
      conn->onReadable = nullptr;
      notify();
    } else if (auto core = conn->owner.lock()) {
      core->dropIdle(conn);
    }
  };
  conn->stream.socket().async_wait(tcp::socket::wait_read, std::move(fired));
}

std::size_t BeastClientCore::idleCount() {
  std::size_t n = 0;
  for (auto& l : loops) {
    std::lock_guard<std::mutex> lock(l->mu);
    n += l->idle.size();
  }
  return n;
}

void BeastClientCore::establish(std::shared_ptr<Conn> conn, Clock::time_point deadline,
                                std::function<void(beast::error_code, Phase)> done) {
  auto& tcpStream = conn->stream.tcp();
  tcpStream.expires_at(std::min(deadline, Clock::now() + options.connectTimeout));
  auto onConnected = [this, conn, deadline, done](const beast::error_code& ec) {
    if (ec) {
      done(ec, Phase::kConnect);
      return;
    }
    beast::error_code ignored;
    conn->stream.socket().set_option(tcp::no_delay(true), ignored);
    if (!conn->stream.isTls()) {
      done({}, Phase::kConnect);
      return;
    }
    auto& tlsStream = conn->stream.tls();
    beast::error_code addressError;
    net::ip::make_address(verifyName, addressError);
    // SNI carries host names only (RFC 6066); an IP address is still verified below.
    std::string sniName = verifyName;  // OpenSSL's macro takes a non-const pointer
    if (addressError && !SSL_set_tlsext_host_name(tlsStream.native_handle(), sniName.data())) {
      done(beast::error_code(static_cast<int>(::ERR_get_error()), net::error::get_ssl_category()),
           Phase::kHandshake);
      return;
    }
    if (options.tls.insecureSkipVerify) {
      tlsStream.set_verify_mode(ssl::verify_none);
    } else {
      tlsStream.set_verify_mode(ssl::verify_peer);
      tlsStream.set_verify_callback(ssl::host_name_verification(verifyName));
    }
    conn->stream.tcp().expires_at(deadline);
    tlsStream.async_handshake(ssl::stream_base::client,
                              [done](const beast::error_code& e) { done(e, Phase::kHandshake); });
  };
  beast::error_code addressError;
  const net::ip::address address = net::ip::make_address(origin.host, addressError);
  if (!addressError) {
    tcpStream.async_connect(tcp::endpoint(address, origin.port), onConnected);
    return;
  }
  auto resolver = std::make_shared<tcp::resolver>(conn->exec);
  resolver->async_resolve(
      origin.host, std::to_string(origin.port),
      [conn, resolver, onConnected, done](const beast::error_code& ec,
                                          const tcp::resolver::results_type& results) {
        if (ec) {
          done(ec, Phase::kConnect);
          return;
        }
        conn->stream.tcp().async_connect(
            results,
            [onConnected](const beast::error_code& e, const tcp::endpoint&) { onConnected(e); });
      });
}

namespace beast_detail {

// The request line and fields of `r` as this client sends them (http/internal/beast_message.h).
std::string wireHead(const BeastClientCore& core, const Request& r) {
  return requestHead(r, core.origin.hostHeader, core.options.userAgent);
}

// "METHOD url" of a request, from its wire head, for error messages: built only when one is
// needed, not for every request.
std::string describeRequest(const BeastClientCore& core, std::string_view wireHead) {
  const std::string_view line = wireHead.substr(0, wireHead.find("\r\n"));
  const std::size_t space = line.find(' ');
  const std::size_t version = line.rfind(' ');
  std::string out(line.substr(0, space));
  out += ' ';
  out += core.origin.url;
  if (space != std::string_view::npos && version > space) {
    out += line.substr(space + 1, version - space - 1);
  }
  return out;
}

// Maps a transport error to kshard's Status vocabulary with a message naming the request.
Status transportError(const BeastClientCore& core, const std::string& what,
                      const beast::error_code& ec, Phase phase, std::chrono::milliseconds timeout) {
  if (ec == beast::error::timeout) {
    if (phase == Phase::kConnect || phase == Phase::kHandshake) {
      // Nothing was sent: Unavailable, like a refused connection, so that the caller may send the
      // request elsewhere (a pod killed with its network gone drops SYNs rather than refusing).
      return unavailable(
          what + ": " + std::string(phaseText(phase)) +
          (phase == Phase::kConnect ? ": no connection within " : ": not finished within ") +
          std::to_string(millis(std::min(timeout, core.options.connectTimeout))) + " ms");
    }
    return deadlineExceeded(what + ": no response within " + std::to_string(millis(timeout)) +
                            " ms");
  }
  if (ec == bhttp::error::body_limit) {
    return {StatusCode::kResourceExhausted, what + ": response body exceeds " +
                                                std::to_string(core.options.maxResponseBytes) +
                                                " bytes"};
  }
  // A TLS error means the session was not established as far as the server is concerned (with
  // TLS 1.3 a refused client certificate shows only at the first read): nothing reached it.
  if (isTlsError(ec)) return unavailable(what + ": TLS handshake failed: " + ec.message());
  if (phase == Phase::kConnect || phase == Phase::kHandshake) {
    return unavailable(what + ": " + std::string(phaseText(phase)) + ": " + ec.message());
  }
  // The request went out, at least in part, and the exchange broke: the server may have acted on
  // it. Unavailable would invite a retry that could apply it twice.
  return outcomeUnknown(what + ": " + std::string(phaseText(phase)) + ": " + ec.message() +
                        " (the request may have been processed)");
}

}  // namespace beast_detail

}  // namespace kshard::http
