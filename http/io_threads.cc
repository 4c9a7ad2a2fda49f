#include "http/io_threads.h"

#include <algorithm>
#include <boost/asio/strand.hpp>

#include "http/internal/io_threads_impl.h"

namespace kshard::http {

namespace {

namespace net = beast_detail::net;

// Which set and loop the current thread runs, for IoThreads::Impl::pick().
thread_local const IoThreads::Impl* tPool = nullptr;
thread_local std::size_t tLoop = 0;

}  // namespace

IoThreads::Impl::Impl(IoThreadsOptions o) : options(std::move(o)) {
  const int n = std::max(1, options.threads);
  const bool perThread = options.model == IoThreadsOptions::Model::kContextPerThread;
  const int loopCount = perThread ? n : 1;
  for (int i = 0; i < loopCount; ++i) {
    // One thread per loop: Asio may skip the locks of a loop that several threads run. The I/O
    // locks (a socket's, taken at each operation it starts and each event it gets, about six
    // pairs per message and connection pair) go too: every socket of such a loop is used from its
    // thread only. The adapters start a connection's operations from its handlers and post
    // everything else to it (a close, an abort, an answer from another thread); a socket is opened
    // for the loop from another thread (an accepted connection) under the registration lock,
    // which stays.
    contexts.push_back(
        std::make_unique<Context>(perThread ? BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO : n));
    work.push_back(net::make_work_guard(*contexts.back()));
  }
  for (int i = 0; i < n; ++i) {
    const std::size_t loop = perThread ? static_cast<std::size_t>(i) : 0;
    threads.emplace_back([this, loop] {
      tPool = this;
      tLoop = loop;
      // Handlers catch their own errors; this is the thread's last line of defence.
      while (true) {
        try {
          contexts[loop]->run();
          return;
        } catch (const std::exception& e) {
          if (options.logger) options.logger->error("http I/O thread", {{"error", e.what()}});
        }
      }
    });
  }
}

std::size_t IoThreads::Impl::pick() { return tPool == this ? tLoop : nextLoop(); }

std::size_t IoThreads::Impl::nextLoop() {
  return next.fetch_add(1, std::memory_order_relaxed) % contexts.size();
}

net::any_io_executor IoThreads::Impl::connectionExecutor(std::size_t index) {
  Context& ctx = *contexts[index % contexts.size()];
  if (options.model == IoThreadsOptions::Model::kContextPerThread) return ctx.get_executor();
  return net::make_strand(ctx);
}

bool IoThreads::Impl::runsInThisThread() const { return tPool == this; }

void IoThreads::Impl::stop() {
  std::lock_guard<std::mutex> lock(stopMu);
  if (stopped) return;
  stopped = true;
  work.clear();
  for (auto& ctx : contexts) ctx->stop();
  for (auto& t : threads) t.join();
  threads.clear();
}

void IoThreads::Impl::drain() {
  std::lock_guard<std::mutex> lock(stopMu);
  if (stopped) return;
  stopped = true;
  work.clear();
  for (auto& t : threads) t.join();
  threads.clear();
}

IoThreads::IoThreads(IoThreadsOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

IoThreads::~IoThreads() { stop(); }

void IoThreads::stop() { impl_->stop(); }

bool IoThreads::runsInThisThread() const { return impl_->runsInThisThread(); }

int IoThreads::threads() const { return std::max(1, impl_->options.threads); }

}  // namespace kshard::http
