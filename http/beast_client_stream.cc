// BeastClientCore::openStream: a streaming response (a watch), read by the caller's thread while
// the connection's loop fills it.
#include <array>
#include <boost/beast/http.hpp>

#include "http/internal/beast_client_core.h"

namespace kshard::http {

namespace {

using namespace beast_detail;  // NOLINT: the adapter's own vocabulary
namespace bhttp = boost::beast::http;

// A stream stops reading from the socket while this much is waiting for read(): a slow consumer
// slows the server down (TCP flow control) instead of growing memory.
constexpr std::size_t kMaxStreamBuffered = 1u << 20;

Headers toHeaders(const bhttp::fields& fields) {
  Headers h;
  for (const auto& f : fields) h.add(std::string(f.name_string()), std::string(f.value()));
  return h;
}

// A streaming response: the I/O side fills `pending_`, read() drains it.
class StreamCore : public Abortable, public std::enable_shared_from_this<StreamCore> {
 public:
  StreamCore(std::shared_ptr<BeastClientCore> core, Request request)
      : core_(std::move(core)),
        timeout_(request.timeout.count() > 0 ? request.timeout : core_->options.requestTimeout),
        deadline_(Clock::now() + timeout_),
        wireHead_(wireHead(*core_, request)),
        body_(request),
        loop_(core_->io().pick()),
        exec_(core_->io().connectionExecutor(loop_)) {}

  ~StreamCore() override {
    if (isTracked) core_->untrack(loop_, this);
  }

  // Blocks until the status and headers arrived or the request failed.
  Status open() {
    if (!core_->track(loop_, this, weak_from_this())) {
      return cancelled(what() + ": the client is shutting down");
    }
    net::post(exec_, [self = shared_from_this()] { self->connect(); });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return headersDone_ || !error_.ok() || cancelled_; });
    if (headersDone_) return {};
    return error_.ok() ? cancelled(what() + ": cancelled") : error_;
  }

  int status() const { return status_; }
  const Headers& headers() const { return headers_; }

  StatusOr<std::string> read(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout,
                 [this] { return !pending_.empty() || eof_ || !error_.ok() || cancelled_; });
    if (cancelled_) return cancelled(what() + ": stream cancelled");
    if (!pending_.empty()) {
      std::string out;
      out.swap(pending_);
      if (paused_) {
        paused_ = false;
        net::post(exec_, [self = shared_from_this()] { self->readBody(); });
      }
      return out;
    }
    if (!error_.ok()) return error_;
    if (eof_) return std::string();
    return deadlineExceeded(what() + ": no data within " + std::to_string(millis(timeout)) + " ms");
  }

  void cancel() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      cancelled_ = true;
    }
    cv_.notify_all();
    // After the client shut down its I/O threads are gone and the connection is already closed.
    if (core_->isClosing(loop_)) return;
    net::post(exec_, [self = shared_from_this()] { self->closeConn(); });
  }

  void abort() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) error_ = cancelled(what() + ": the client is shutting down");
    }
    cv_.notify_all();
    net::post(exec_, [self = shared_from_this()] { self->closeConn(); });
  }

 private:
  void closeConn() {
    if (conn_) conn_->stream.close();
    core_->untrack(loop_, this);
  }

  bool stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_ || !error_.ok();
  }

  void fail(Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) error_ = std::move(status);
    }
    cv_.notify_all();
    closeConn();
  }

  // The completion handler of a write or header read: unless the stream stopped, `next` on
  // success, failIo on an error.
  auto afterIo(Phase phase, void (StreamCore::*next)()) {
    return [self = shared_from_this(), phase, next](const beast::error_code& ec, std::size_t) {
      if (self->stopped()) return;
      if (ec) {
        self->failIo(ec, phase);
        return;
      }
      ((*self).*next)();
    };
  }

  void connect() {
    if (stopped()) return;
    conn_ = core_->newConn(loop_, exec_);
    core_->establish(
        conn_, deadline_, [self = shared_from_this()](beast::error_code ec, Phase phase) {
          if (self->stopped()) return;
          if (ec) {
            self->fail(transportError(*self->core_, self->what(), ec, phase, self->timeout_));
            return;
          }
          self->write();
        });
  }

  void write() {
    // Until the headers are in, the connection's watchdog keeps the deadline.
    conn_->stream.tcp().expires_never();
    conn_->watchdog.expiresAt(deadline_);
    asyncWriteMessage(conn_->stream, wireHead_, body_.view(),
                      afterIo(Phase::kWrite, &StreamCore::readHeader));
  }

  // A failed write or header read; past the deadline, whatever the operation reported, it is the
  // watchdog that closed the connection.
  void failIo(beast::error_code ec, Phase phase) {
    if (conn_->timedOut) ec = beast::error::timeout;
    fail(transportError(*core_, what(), ec, phase, timeout_));
  }

  void readHeader() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // a watch runs for hours
    conn_->stream.visit([this](auto& s) {
      bhttp::async_read_header(s, conn_->buffer, *parser_,
                               afterIo(Phase::kRead, &StreamCore::onHeader));
    });
  }

  void onHeader() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = static_cast<int>(parser_->get().result_int());
      headers_ = toHeaders(parser_->get());
      headersDone_ = true;
      eof_ = parser_->is_done();
    }
    cv_.notify_all();
    // The body has no deadline: read() has its own timeout, and cancel() ends it.
    conn_->watchdog.never();
    readBody();
  }

  void readBody() {
    if (stopped() || parser_->is_done()) return;
    parser_->get().body().data = buf_.data();
    parser_->get().body().size = buf_.size();
    conn_->stream.visit([this](auto& s) {
      bhttp::async_read_some(
          s, conn_->buffer, *parser_,
          [self = shared_from_this()](beast::error_code ec, std::size_t) { self->onBody(ec); });
    });
  }

  void onBody(beast::error_code ec) {
    if (ec == bhttp::error::need_buffer) ec = {};
    const std::size_t got = buf_.size() - parser_->get().body().size;
    bool more = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) return;
      pending_.append(buf_.data(), got);
      if (ec) {
        if (error_.ok()) {
          error_ = (ec == bhttp::error::partial_message || ec == bhttp::error::end_of_stream)
                       ? unavailable(what() + ": the stream ended before the body was complete")
                       : transportError(*core_, what(), ec, Phase::kRead, timeout_);
        }
      } else if (parser_->is_done()) {
        eof_ = true;
      } else if (pending_.size() >= kMaxStreamBuffered) {
        paused_ = true;
      } else {
        more = true;
      }
    }
    cv_.notify_all();
    if (more) {
      readBody();
    } else if (ec || eof_) {
      closeConn();
    }
  }

  const std::shared_ptr<BeastClientCore> core_;
  const std::chrono::milliseconds timeout_;
  const Clock::time_point deadline_;
  std::string what() const { return describeRequest(*core_, wireHead_); }

  const std::string wireHead_;  // the request line and fields
  const OutgoingBody body_;
  const std::size_t loop_;
  const net::any_io_executor exec_;
  std::shared_ptr<Conn> conn_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
  std::array<char, 16 * 1024> buf_{};

  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool headersDone_ = false;
  bool eof_ = false;
  bool paused_ = false;
  bool cancelled_ = false;
  Status error_;
  int status_ = 0;
  Headers headers_;
};

class BeastResponseStream : public ResponseStream {
 public:
  explicit BeastResponseStream(std::shared_ptr<StreamCore> core) : core_(std::move(core)) {}
  ~BeastResponseStream() override { core_->cancel(); }
  int status() const override { return core_->status(); }
  const Headers& headers() const override { return core_->headers(); }
  StatusOr<std::string> read(std::chrono::milliseconds timeout) override {
    return core_->read(timeout);
  }
  void cancel() override { core_->cancel(); }

 private:
  std::shared_ptr<StreamCore> core_;
};

}  // namespace

StatusOr<std::unique_ptr<ResponseStream>> BeastClientCore::openStream(Request request) {
  auto stream = std::make_shared<StreamCore>(shared_from_this(), std::move(request));
  if (Status s = stream->open(); !s.ok()) {
    stream->cancel();
    return s;
  }
  return std::unique_ptr<ResponseStream>(std::make_unique<BeastResponseStream>(std::move(stream)));
}

}  // namespace kshard::http
