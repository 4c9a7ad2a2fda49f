#include "http/cpprest_client.h"

#include <cpprest/http_client.h>
#include <cpprest/producerconsumerstream.h>
#include <pplx/threadpool.h>

#include <boost/asio/steady_timer.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <system_error>

#include "http/internal/core_client.h"
#include "http/internal/origin.h"
#include "http/internal/tls_context.h"

namespace kshard::http {

namespace {

namespace web_http = web::http;
using web::http::client::http_client;
using web::http::client::http_client_config;
using Buffer = concurrency::streams::producer_consumer_buffer<uint8_t>;

// cpprestsdk's own inactivity timeout; our deadlines are shorter and enforced by a timer.
// Streams get a long one, since a watch may stay quiet for many minutes.
constexpr std::chrono::hours kLibraryTimeout{1};
constexpr std::chrono::hours kStreamLibraryTimeout{24};
constexpr std::size_t kPumpChunk = 16 * 1024;
// How long destroying a stream waits for cpprestsdk to finish its cancelled request.
constexpr std::chrono::seconds kStreamTeardownWait{2};

long long millis(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

// `sideEffects`: the request is not idempotent (a POST), so a failure after it may have gone out
// is OutcomeUnknown. cpprestsdk does not say whether the request was written; only errors that
// happen before any connection (refused, unreachable) surely sent nothing.
Status libraryError(const std::string& what, const std::exception& e, bool sideEffects = false) {
  if (const auto* h = dynamic_cast<const web_http::http_exception*>(&e)) {
    const std::error_code ec = h->error_code();
    if (ec == std::errc::timed_out) return deadlineExceeded(what + ": " + e.what());
    if (ec == std::errc::connection_refused || ec == std::errc::host_unreachable ||
        ec == std::errc::network_unreachable || ec == std::errc::address_not_available) {
      return unavailable(what + ": " + e.what());
    }
  }
  if (sideEffects) {
    return outcomeUnknown(what + ": " + e.what() + " (the request may have been processed)");
  }
  return unavailable(what + ": " + e.what());
}

// Moves bytes out of a producer_consumer_buffer as they arrive. cpprestsdk writes the response
// body into the buffer; we close it when cpprestsdk says the body is complete (or failed).
class Pump : public std::enable_shared_from_this<Pump> {
 public:
  // `onData` returns false to stop; `onEnd` gets OK at the end of the body.
  // `onGone`, if any, runs when the pump is destroyed, after its last read.
  Pump(Buffer buffer, std::function<bool(const char*, std::size_t)> onData,
       std::function<void(Status)> onEnd, std::function<void()> onGone = nullptr)
      : buffer_(std::move(buffer)),
        onData_(std::move(onData)),
        onEnd_(std::move(onEnd)),
        onGone_(std::move(onGone)) {}
  ~Pump() {
    if (onGone_) onGone_();
  }
  Pump(const Pump&) = delete;
  Pump& operator=(const Pump&) = delete;

  void next() {
    // Wait for one byte, then take whatever else is there without waiting.
    buffer_.getn(chunk_.data(), 1).then([self = shared_from_this()](pplx::task<size_t> t) {
      self->onRead(std::move(t));
    });
  }

 private:
  void onRead(pplx::task<size_t> t) {
    std::size_t n = 0;
    try {
      n = t.get();
      if (n == 0) {
        onEnd_(Status());
        return;
      }
      const std::size_t more = std::min(buffer_.in_avail(), chunk_.size() - 1);
      if (more > 0) n += buffer_.getn(chunk_.data() + 1, more).get();
    } catch (const std::exception& e) {
      onEnd_(unavailable(std::string("reading the response body: ") + e.what()));
      return;
    }
    if (!onData_(reinterpret_cast<const char*>(chunk_.data()), n)) return;
    next();
  }

  Buffer buffer_;
  std::array<uint8_t, kPumpChunk> chunk_{};
  std::function<bool(const char*, std::size_t)> onData_;
  std::function<void(Status)> onEnd_;
  std::function<void()> onGone_;
};

}  // namespace

struct CppRestClientCore : std::enable_shared_from_this<CppRestClientCore> {
  // The client's work (CoreClient). Nothing to close: a call in flight holds the core and ends
  // by itself.
  void send(Request request, ResponseCallback done);
  StatusOr<std::unique_ptr<ResponseStream>> openStream(Request request);
  void close() {}

  ClientOptions options;
  Origin origin;
  std::unique_ptr<http_client> client;
  std::unique_ptr<http_client> streamClient;

  // Builds the cpprestsdk request: InvalidArgument when the target is not a valid URI.
  StatusOr<web_http::http_request> toCppRest(Request& r) const {
    web_http::http_request req(std::string(methodName(r.method)));
    try {
      req.set_request_uri(web::uri(r.target.empty() ? std::string("/") : r.target));
    } catch (const std::exception& e) {
      return invalidArgument("malformed request target " + r.target + ": " + e.what());
    }
    if (const std::string_view body = r.payload(); !body.empty()) {
      // Bytes, not a std::string: see toCppRest in cpprest_server.cc.
      req.set_body(std::vector<unsigned char>(body.begin(), body.end()));
      if (!r.headers.has("Content-Type")) req.headers().remove("Content-Type");
    }
    for (const auto& [name, value] : r.headers) {
      if (isFramingHeader(name)) {
        continue;
      }
      if (equalsIgnoreCase(name, "Content-Type")) req.headers().remove("Content-Type");
      req.headers().add(std::string(name), std::string(value));
    }
    if (!options.tls.serverName.empty() && !req.headers().has("Host")) {
      req.headers().add("Host", options.tls.serverName);
    }
    if (!options.userAgent.empty() && !req.headers().has("User-Agent")) {
      req.headers().add("User-Agent", options.userAgent);
    }
    return req;
  }
};

namespace {

// One request: the first of response, failure and deadline answers `done`.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(std::shared_ptr<CppRestClientCore> impl, std::string what, std::chrono::milliseconds timeout,
       bool sideEffects, ResponseCallback done)
      : impl_(std::move(impl)),
        what_(std::move(what)),
        timeout_(timeout),
        sideEffects_(sideEffects),
        done_(std::move(done)),
        timer_(crossplat::threadpool::shared_instance().service()) {}

  void start(web_http::http_request req) {
    Buffer buffer;
    req.set_response_stream(buffer.create_ostream());
    {
      std::lock_guard<std::mutex> lock(mu_);
      timer_.expires_after(timeout_);
      timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec) return;
        self->finish(deadlineExceeded(self->what_ + ": no response within " +
                                      std::to_string(millis(self->timeout_)) + " ms"));
      });
    }
    auto self = shared_from_this();
    pplx::task<web_http::http_response> response;
    try {
      response = impl_->client->request(req, cts_.get_token());
    } catch (const std::exception& e) {
      finish(libraryError(what_, e));
      return;
    }
    response.then([self, buffer](pplx::task<web_http::http_response> t) mutable {
      self->onResponse(std::move(t), std::move(buffer));
    });
  }

 private:
  void onResponse(pplx::task<web_http::http_response> t, Buffer buffer) {
    web_http::http_response response;
    try {
      response = t.get();
    } catch (const std::exception& e) {
      finish(libraryError(what_, e, sideEffects_));
      return;
    }
    const std::size_t limit = impl_->options.maxResponseBytes;
    if (response.headers().content_length() > limit) {
      finish(Status{StatusCode::kResourceExhausted,
                    what_ + ": response body exceeds " + std::to_string(limit) + " bytes"});
      return;
    }
    result_.status = response.status_code();
    for (const auto& [name, value] : response.headers()) result_.headers.add(name, value);
    response.content_ready().then([buffer](pplx::task<web_http::http_response> done) mutable {
      try {
        done.get();
        buffer.close(std::ios_base::out);
      } catch (const std::exception&) {
        buffer.close(std::ios_base::out, std::current_exception());
      }
    });
    auto self = shared_from_this();
    std::make_shared<Pump>(
        buffer,
        [self, limit](const char* data, std::size_t n) {
          if (self->result_.body.size() + n > limit) {
            self->finish(Status{
                StatusCode::kResourceExhausted,
                self->what_ + ": response body exceeds " + std::to_string(limit) + " bytes"});
            return false;
          }
          self->result_.body.append(data, n);
          return true;
        },
        [self](Status end) {
          if (end.ok()) {
            self->finish(std::move(self->result_));
          } else {
            self->finish(Status(end.code(), self->what_ + ": " + end.message()));
          }
        })
        ->next();
  }

  void finish(StatusOr<Response> result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;
      finished_ = true;
      timer_.cancel();
    }
    if (!result.ok()) cts_.cancel();
    ResponseCallback done = std::move(done_);
    done(std::move(result));
  }

  const std::shared_ptr<CppRestClientCore> impl_;
  const std::string what_;
  const std::chrono::milliseconds timeout_;
  const bool sideEffects_;
  ResponseCallback done_;
  pplx::cancellation_token_source cts_;
  std::mutex mu_;
  boost::asio::steady_timer timer_;
  bool finished_ = false;
  Response result_;
};

class CppRestResponseStream : public ResponseStream {
 public:
  explicit CppRestResponseStream(std::string what) : what_(std::move(what)) {}
  // Cancels the request, then waits (at most kStreamTeardownWait) until cpprestsdk has finished
  // it and the pump has stopped, so that neither outlives the stream: left in cpprestsdk's task
  // queue, they were reported as leaks when the process exited right after a cancelled watch.
  ~CppRestResponseStream() override {
    cancel();
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->cv.wait_for(lock, kStreamTeardownWait,
                         [this] { return shared_->bodyDone && shared_->pumpGone; });
  }

  int status() const override { return status_; }
  const Headers& headers() const override { return headers_; }

  StatusOr<std::string> read(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(shared_->mu);
    shared_->cv.wait_for(lock, timeout, [this] {
      return !shared_->pending.empty() || shared_->ended || shared_->cancelled;
    });
    if (shared_->cancelled) return cancelled(what_ + ": stream cancelled");
    if (!shared_->pending.empty()) {
      std::string out;
      out.swap(shared_->pending);
      return out;
    }
    if (shared_->ended) {
      if (!shared_->error.ok()) return shared_->error;
      return std::string();
    }
    return deadlineExceeded(what_ + ": no data within " + std::to_string(millis(timeout)) + " ms");
  }

  void cancel() override {
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (shared_->cancelled) return;
      shared_->cancelled = true;
    }
    shared_->cv.notify_all();
    cts_.cancel();
  }

  // What the pump and the reader share; outlives this object while cpprestsdk still writes.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::string pending;
    bool ended = false;
    bool cancelled = false;
    Status error;
    bool bodyDone = true;  // false while cpprestsdk still receives the body
    bool pumpGone = true;  // false while the pump exists
  };

  const std::string what_;
  int status_ = 0;
  Headers headers_;
  pplx::cancellation_token_source cts_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

// Sends `req` for `stream` and waits for the status and headers only, bounded by `timeout`.
StatusOr<web_http::http_response> awaitHeaders(http_client& client, web_http::http_request& req,
                                               CppRestResponseStream& stream,
                                               std::chrono::milliseconds timeout) {
  try {
    pplx::task<web_http::http_response> task = client.request(req, stream.cts_.get_token());
    auto ready = std::make_shared<std::promise<void>>();
    std::future<void> headersArrived = ready->get_future();
    task.then([ready](pplx::task<web_http::http_response> t) {
      // Observed here (pplx traps on an unobserved failure); the caller reads `task` itself.
      try {
        t.get();
        ready->set_value();
      } catch (const std::exception&) {
        ready->set_value();
      }
    });
    if (headersArrived.wait_for(timeout) != std::future_status::ready) {
      stream.cts_.cancel();
      return deadlineExceeded(stream.what_ + ": no response within " +
                              std::to_string(millis(timeout)) + " ms");
    }
    return task.get();
  } catch (const std::exception& e) {
    return libraryError(stream.what_, e);
  }
}

// Closes `buffer` once cpprestsdk has received the whole body of `response` (or failed), which
// ends the pump; `shared->bodyDone` tells the stream's destructor.
void closeWhenReceived(web_http::http_response& response, Buffer buffer,
                       std::shared_ptr<CppRestResponseStream::Shared> shared) {
  response.content_ready().then([buffer, shared](pplx::task<web_http::http_response> done) mutable {
    try {
      done.get();
      buffer.close(std::ios_base::out);
    } catch (const std::exception&) {
      buffer.close(std::ios_base::out, std::current_exception());
    }
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->bodyDone = true;
    }
    shared->cv.notify_all();
  });
}

// Moves the body, as it arrives in `buffer`, to `shared` for the stream's read().
void pumpInto(Buffer buffer, std::shared_ptr<CppRestResponseStream::Shared> shared,
              const std::string& what) {
  std::make_shared<Pump>(
      buffer,
      [shared](const char* data, std::size_t n) {
        {
          std::lock_guard<std::mutex> lock(shared->mu);
          if (shared->cancelled) return false;
          shared->pending.append(data, n);
        }
        shared->cv.notify_all();
        return true;
      },
      [shared, what](Status end) {
        {
          std::lock_guard<std::mutex> lock(shared->mu);
          shared->ended = true;
          if (!end.ok()) {
            shared->error = unavailable(what + ": the stream ended before the body was complete (" +
                                        end.message() + ")");
          }
        }
        shared->cv.notify_all();
      },
      [shared] {
        {
          std::lock_guard<std::mutex> lock(shared->mu);
          shared->pumpGone = true;
        }
        shared->cv.notify_all();
      })
      ->next();
}

}  // namespace

StatusOr<std::unique_ptr<Client>> makeCppRestClient(ClientOptions options) {
  StatusOr<Origin> origin = parseOrigin(options.baseUrl);
  if (!origin.ok()) return origin.status();
  auto impl = std::make_shared<CppRestClientCore>();
  impl->origin = std::move(*origin);
  impl->options = std::move(options);
  http_client_config config;
  if (impl->origin.tls) {
    // Load once here so unreadable material fails create(); cpprestsdk then calls the callback
    // for every new connection.
    boost::asio::ssl::context probe(boost::asio::ssl::context::tls_client);
    if (Status s = configureClientTls(probe, impl->options.tls); !s.ok()) {
      return s.withContext("TLS for " + impl->origin.url);
    }
    config.set_validate_certificates(!impl->options.tls.insecureSkipVerify);
    config.set_ssl_context_callback([tls = impl->options.tls](boost::asio::ssl::context& ctx) {
      // Validated above; should a file vanish since, the handshake fails and says so.
      (void)configureClientTls(ctx, tls);
    });
  }
  try {
    config.set_timeout(kLibraryTimeout);
    impl->client = std::make_unique<http_client>(web::uri(impl->origin.url), config);
    config.set_timeout(kStreamLibraryTimeout);
    impl->streamClient = std::make_unique<http_client>(web::uri(impl->origin.url), config);
  } catch (const std::exception& e) {
    return invalidArgument("creating a client for " + impl->origin.url + ": " + e.what());
  }
  return std::unique_ptr<Client>(std::make_unique<CoreClient<CppRestClientCore>>(std::move(impl)));
}

void CppRestClientCore::send(Request request, ResponseCallback done) {
  const std::chrono::milliseconds timeout =
      request.timeout.count() > 0 ? request.timeout : options.requestTimeout;
  std::string what = std::string(methodName(request.method)) + " " + origin.url + request.target;
  StatusOr<web_http::http_request> req = toCppRest(request);
  if (!req.ok()) {
    done(req.status());
    return;
  }
  const bool sideEffects = request.method == Method::kPost || request.method == Method::kPatch;
  std::make_shared<Call>(shared_from_this(), std::move(what), timeout, sideEffects, std::move(done))
      ->start(std::move(*req));
}

StatusOr<std::unique_ptr<ResponseStream>> CppRestClientCore::openStream(Request request) {
  const std::chrono::milliseconds timeout =
      request.timeout.count() > 0 ? request.timeout : options.requestTimeout;
  auto stream = std::make_unique<CppRestResponseStream>(std::string(methodName(request.method)) +
                                                        " " + origin.url + request.target);
  StatusOr<web_http::http_request> req = toCppRest(request);
  if (!req.ok()) return req.status();
  Buffer buffer;
  req->set_response_stream(buffer.create_ostream());
  StatusOr<web_http::http_response> response = awaitHeaders(*streamClient, *req, *stream, timeout);
  if (!response.ok()) return response.status();
  stream->status_ = response->status_code();
  for (const auto& [name, value] : response->headers()) stream->headers_.add(name, value);
  std::shared_ptr<CppRestResponseStream::Shared> shared = stream->shared_;
  {
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->bodyDone = false;
    shared->pumpGone = false;
  }
  closeWhenReceived(*response, buffer, shared);
  pumpInto(buffer, shared, stream->what_);
  return std::unique_ptr<ResponseStream>(std::move(stream));
}

}  // namespace kshard::http
