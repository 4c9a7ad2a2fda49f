#include "http/cpprest_server.h"

#include <cpprest/http_listener.h>
#include <cpprest/producerconsumerstream.h>
#include <pplx/threadpool.h>

#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "http/internal/free_port.h"
#include "http/internal/tls_context.h"
#include "http/router.h"

namespace kshard::http {

namespace {

namespace web_http = web::http;
using web::http::experimental::listener::http_listener;
using web::http::experimental::listener::http_listener_config;

constexpr int kPortAttempts = 10;
constexpr std::size_t kReadChunk = 16 * 1024;

// Copies our headers onto a cpprestsdk message, leaving framing to cpprestsdk. set_body() adds a
// default Content-Type, so ours replaces it.
void copyHeaders(const Headers& from, web_http::http_headers& to) {
  for (const auto& [name, value] : from) {
    if (isFramingHeader(name)) continue;
    if (equalsIgnoreCase(name, "Content-Type")) to.remove("Content-Type");
    to.add(std::string(name), std::string(value));
  }
}

web_http::http_response toCppRest(Response response) {
  web_http::http_response out(static_cast<web_http::status_code>(response.status));
  if (const std::string_view body = response.payload(); !body.empty()) {
    // A byte vector, not a std::string: cpprestsdk serves a string body through a char buffer
    // cast to its byte buffer type, which UBSan rightly reports.
    out.set_body(std::vector<unsigned char>(body.begin(), body.end()));
    if (!response.headers.has("Content-Type")) out.headers().remove("Content-Type");
  }
  copyHeaders(response.headers, out.headers());
  return out;
}

}  // namespace

struct CppRestServer::Impl : ServerCore, std::enable_shared_from_this<CppRestServer::Impl> {
  explicit Impl(ServerOptions o) : ServerCore(std::move(o)) {}

  void onRequest(web_http::http_request req);
  // Answers `req`; a request already answered (the connection closed, or a 413 sent) is left as
  // it is. With `handlerDone`, the request stops counting as in flight once the answer was
  // written (or failed), so stop() does not close a connection in the middle of it.
  void reply(web_http::http_request& req, web_http::http_response response,
             bool handlerDone = false) {
    auto self = shared_from_this();
    try {
      pplx::task<void> sent = req.reply(std::move(response));
      sent.then([self, handlerDone](pplx::task<void> t) {
        try {
          t.get();
        } catch (const std::exception& e) {
          if (self->options.logger)
            self->options.logger->debug("http reply failed", {{"error", e.what()}});
        }
        if (handlerDone) self->handlerDone();
      });
    } catch (const std::exception& e) {
      if (options.logger) options.logger->debug("http reply dropped", {{"error", e.what()}});
      if (handlerDone) this->handlerDone();
    }
  }
  // Answers before the body was read: tells cpprestsdk the body is over (it writes no answer
  // before that), and closes the connection, whose framing is now lost.
  void rejectEarly(web_http::http_request& req, int status, std::string_view code,
                   std::string_view message) {
    req._get_impl()->_complete(0,
                               std::make_exception_ptr(std::runtime_error(std::string(message))));
    Response r = Response::error(status, code, message);
    r.headers.set("Connection", "close");
    reply(req, toCppRest(std::move(r)));
  }
  void rejectTooLarge(web_http::http_request& req, std::size_t limit) {
    rejectEarly(req, 413, "PayloadTooLarge",
                "request body exceeds " + std::to_string(limit) + " bytes");
  }
  // The server's body limit, or the request's route's when lower.
  std::size_t bodyLimit(const Request& request) const {
    if (!router.hasBodyLimits()) return options.maxBodyBytes;
    return std::min(
        options.maxBodyBytes,
        router.bodyLimit(request.method, request.target).value_or(options.maxBodyBytes));
  }
  void dispatch(web_http::http_request req, Request request);
  void handlerDone() {
    std::lock_guard<std::mutex> lock(mu);
    --inflight;
    cv.notify_all();
  }

  std::unique_ptr<http_listener> listener;
  std::mutex mu;
  std::condition_variable cv;
  std::size_t inflight = 0;
  bool running = false;
  bool stopped = false;
};

namespace {

// Reads a request body up to the limit and the deadline, then hands the request to the router.
class BodyReader : public std::enable_shared_from_this<BodyReader> {
 public:
  BodyReader(std::shared_ptr<CppRestServer::Impl> impl, web_http::http_request req, Request request,
             std::size_t limit)
      : impl_(std::move(impl)),
        req_(std::move(req)),
        request_(std::move(request)),
        limit_(limit),
        timer_(crossplat::threadpool::shared_instance().service()) {}

  void start() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      timer_.expires_after(impl_->options.requestTimeout);
      timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec) return;
        const auto ms = std::to_string(self->impl_->options.requestTimeout.count());
        if (self->claim()) {
          self->impl_->rejectEarly(self->req_, 408, "RequestTimeout",
                                   "request body not received within " + ms + " ms");
        }
      });
    }
    next();
  }

 private:
  void next() {
    auto buffer = req_.body().streambuf();
    buffer.getn(chunk_.data(), chunk_.size())
        .then([self = shared_from_this()](pplx::task<size_t> t) { self->onChunk(std::move(t)); });
  }

  void onChunk(pplx::task<size_t> t) {
    size_t n = 0;
    try {
      n = t.get();
    } catch (const std::exception& e) {
      // The peer went away mid-body, or we rejected the request already: nobody to answer.
      if (claim() && impl_->options.logger) {
        impl_->options.logger->debug("http request body failed", {{"error", e.what()}});
      }
      return;
    }
    if (n == 0) {
      if (claim()) impl_->dispatch(req_, std::move(request_));
      return;
    }
    request_.body.append(reinterpret_cast<const char*>(chunk_.data()), n);
    if (request_.body.size() > limit_) {
      if (claim()) impl_->rejectTooLarge(req_, limit_);
      return;
    }
    next();
  }

  // The first of completion, rejection and timeout wins.
  bool claim() {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return false;
    finished_ = true;
    timer_.cancel();
    return true;
  }

  const std::shared_ptr<CppRestServer::Impl> impl_;
  web_http::http_request req_;
  Request request_;
  const std::size_t limit_;
  std::array<unsigned char, kReadChunk> chunk_{};
  std::mutex mu_;
  boost::asio::steady_timer timer_;
  bool finished_ = false;
};

// A streamed response body: cpprestsdk reads the buffer and sends each sync()ed piece as a chunk.
class CppRestStreamWriter : public StreamWriter {
 public:
  CppRestStreamWriter(std::shared_ptr<CppRestServer::Impl> impl,
                      concurrency::streams::producer_consumer_buffer<uint8_t> buffer)
      : impl_(std::move(impl)), buffer_(std::move(buffer)) {}
  ~CppRestStreamWriter() override { finish(); }

  bool write(std::string chunk) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_ || !buffer_.can_write()) return false;
    if (chunk.empty()) return true;
    try {
      // producer_consumer_buffer copies at once; sync() releases the bytes to the sender now
      // rather than when 4 KiB have gathered.
      buffer_.putn_nocopy(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size()).wait();
      buffer_.sync().wait();
    } catch (const std::exception&) {
      return false;
    }
    return true;
  }
  void finish() override { end(nullptr); }
  void abort() override {
    // A buffer closed with an error makes cpprestsdk drop the connection without the last chunk.
    end(std::make_exception_ptr(std::runtime_error("stream aborted by the handler")));
  }

 private:
  void end(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    ended_ = true;
    try {
      if (error) {
        buffer_.close(std::ios_base::out, error).wait();
      } else {
        buffer_.close(std::ios_base::out).wait();
      }
    } catch (const std::exception&) {
      // The connection is gone already; there is nothing left to end.
    }
    impl_->handlerDone();
  }

  const std::shared_ptr<CppRestServer::Impl> impl_;
  concurrency::streams::producer_consumer_buffer<uint8_t> buffer_;
  std::mutex mu_;
  bool ended_ = false;
};

}  // namespace

void CppRestServer::Impl::onRequest(web_http::http_request req) {
  try {
    const std::optional<Method> method = parseMethod(req.method());
    if (!method) {
      reply(req, toCppRest(Response::error(501, "NotImplemented",
                                           "method " + req.method() + " is not supported")));
      return;
    }
    Request request;
    request.method = *method;
    request.target = req.request_uri().to_string();
    for (const auto& [name, value] : req.headers()) request.headers.add(name, value);
    request.remoteAddress = req.remote_address();
    const std::uint64_t length = req.headers().content_length();
    const std::size_t limit = bodyLimit(request);
    if (length > limit) {
      rejectTooLarge(req, limit);
      return;
    }
    if (length == 0 && !req.headers().has("Transfer-Encoding")) {
      dispatch(std::move(req), std::move(request));
      return;
    }
    request.body.reserve(length);
    std::make_shared<BodyReader>(shared_from_this(), std::move(req), std::move(request), limit)
        ->start();
  } catch (const std::exception& e) {
    // cpprestsdk's own request handling threw (a malformed URI, a closed stream).
    if (options.logger) options.logger->warn("http request failed", {{"error", e.what()}});
    reply(req, toCppRest(Response::error(500, "Internal", e.what())));
  }
}

void CppRestServer::Impl::dispatch(web_http::http_request req, Request request) {
  {
    std::lock_guard<std::mutex> lock(mu);
    ++inflight;
  }
  auto self = shared_from_this();
  Responder responder(
      [self, req](Response response) mutable {
        self->reply(req, toCppRest(std::move(response)), /*handlerDone=*/true);
      },
      [self, req](int status, Headers headers) mutable -> std::unique_ptr<StreamWriter> {
        concurrency::streams::producer_consumer_buffer<uint8_t> buffer;
        web_http::http_response response(static_cast<web_http::status_code>(status));
        response.set_body(buffer.create_istream());
        if (!headers.has("Content-Type")) response.headers().remove("Content-Type");
        copyHeaders(headers, response.headers());
        self->reply(req, std::move(response));
        return std::make_unique<CppRestStreamWriter>(self, std::move(buffer));
      });
  router.dispatch(std::move(request), std::move(responder));
}

CppRestServer::CppRestServer(ServerOptions options)
    : ServerAdapter(std::make_shared<Impl>(std::move(options))) {}

CppRestServer::~CppRestServer() { stop(); }

Status CppRestServer::start() {
  Impl& impl = core<Impl>();
  if (impl.running || impl.stopped) return failedPrecondition("the server was already started");
  const auto& o = impl.options;
  http_listener_config config;
  if (o.tls) {
    // Load once here so a bad file fails start(); the callback then loads it per connection.
    boost::asio::ssl::context probe(boost::asio::ssl::context::tls_server);
    if (Status s = configureServerTls(probe, *o.tls); !s.ok()) {
      return s.withContext("starting the server on " + o.host);
    }
    config.set_ssl_context_callback([tls = *o.tls](boost::asio::ssl::context& ctx) {
      // Already validated at start(); a failure now (a file removed since) fails the handshake.
      (void)configureServerTls(ctx, tls);
    });
  }
  const std::string host = o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host;
  Status lastError;
  for (int attempt = 0; attempt < (o.port == 0 ? kPortAttempts : 1); ++attempt) {
    std::uint16_t port = o.port;
    if (port == 0) {
      StatusOr<std::uint16_t> picked = pickFreePort(o.host);
      if (!picked.ok()) return picked.status();
      port = *picked;
    }
    const std::string url =
        std::string(o.tls ? "https://" : "http://") + host + ":" + std::to_string(port) + "/";
    try {
      auto listener = std::make_unique<http_listener>(web::uri(url), config);
      Impl* raw = &impl;
      listener->support([raw](web_http::http_request req) { raw->onRequest(std::move(req)); });
      // cpprest answers TRACE (200, echoing the request) and OPTIONS (200, Allow from the
      // methods claimed here) itself unless a handler claims them; the router answers them as
      // the Beast server's do (405 with the path's Allow).
      for (const auto& method : {web_http::methods::TRCE, web_http::methods::OPTIONS}) {
        listener->support(method,
                          [raw](web_http::http_request req) { raw->onRequest(std::move(req)); });
      }
      listener->open().wait();
      impl.listener = std::move(listener);
      impl.port = port;
      impl.running = true;
      return {};
    } catch (const std::exception& e) {
      lastError = unavailable("listening on " + url + ": " + e.what());
    }
  }
  return lastError;
}

void CppRestServer::stop(std::chrono::milliseconds grace) {
  Impl& impl = core<Impl>();
  if (!impl.running) return;
  impl.running = false;
  impl.stopped = true;
  {
    std::unique_lock<std::mutex> lock(impl.mu);
    impl.cv.wait_for(lock, grace, [&impl] { return impl.inflight == 0; });
  }
  try {
    // Closes every connection (unanswered requests get cpprestsdk's 500) and waits for them.
    impl.listener->close().wait();
  } catch (const std::exception& e) {
    if (impl.options.logger) impl.options.logger->warn("http stop failed", {{"error", e.what()}});
  }
}

}  // namespace kshard::http
